# The two commands a new user needs are `make tour` (numadb tour: this machine's NUMA story in two minutes) and
# `make test`.
.PHONY: tour test deps guests

tour:
	cargo run --release --locked --quiet -p numadb -- tour

test:
	scripts/test.sh

deps:
	scripts/install-deps.sh

guests:
	cargo run --locked --quiet -p numa-vm -- test
