"""`make bench`: the speed figures of the memory engine (not part of `make test`)."""
