# soak.mk - `make soak`: the crash-safety test with 200 SIGKILL rounds
# (tests/integration/61-robust-crash.sh; make test runs 20).
SOAK_ROUNDS ?= 200
.PHONY: soak
soak: deps all
	@PODRES_BIN=$(CURDIR)/$(BIN) ROUNDS=$(SOAK_ROUNDS) bash tests/integration/61-robust-crash.sh
