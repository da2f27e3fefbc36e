"""`evertalk memory browse`: a read-only page of the memory, served on 127.0.0.1 or written
as one HTML file. Standard library only; the page is plain HTML, CSS and JavaScript."""
