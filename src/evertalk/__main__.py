from evertalk.cli import main

raise SystemExit(main())
