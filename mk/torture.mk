# torture.mk - `make torture`: the allocation-failure walk of every request
# path (tests/integration/60-robust-torture.sh with TORTURE=full). Run it on
# the sanitizer build for the leak check: make SANITIZE=address,undefined torture.
.PHONY: torture
torture: deps all
	@PODRES_BIN=$(CURDIR)/$(BIN) TORTURE=full bash tests/integration/60-robust-torture.sh
