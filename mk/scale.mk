# mk/scale.mk - `make scale`: what K podres nodes (a real podresd and podres-syncer each) cost
# one real control plane, phase by phase (tests/scale/scale.py; figures in docs/SCALE.md). Not
# part of `make test`. SCALE_NODES (20), SCALE_IDLE (30 s), SCALE_CHURN (60 s), SCALE_RATE (new
# pods per node per minute, 6), SCALE_LIFE (s, 5) are read from the environment.

SCALE_DIR := build/scale

# Not `kube` as a prerequisite: build/kube/ may be a cache shared between checkouts, and
# a checkout's newer source times would rebuild it under the others' feet; the control
# plane's script says when its binaries are missing (`make kube`).
.PHONY: scale
scale: deps all
	@tests/scale/scale.py $(BIN) $(SCALE_DIR)
