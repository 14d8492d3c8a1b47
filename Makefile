# The two commands a new user needs are `make tour` (for now: what numadb sees of this machine) and `make test`.
.PHONY: tour test deps guests

tour:
	cargo run --release --locked --quiet -p numadb -- topo

test:
	scripts/test.sh

deps:
	scripts/install-deps.sh

guests:
	cargo run --locked --quiet -p numa-vm -- test
