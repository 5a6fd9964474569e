# mk/bench.mk - `make bench`: podres against its references, side by side in
# one run (tests/bench/run.sh; results in docs/BENCHMARKS.md). Not part of
# `make test`. Builds the default optimised binaries (-O2) and the bench tools;
# the syncer rows run against the real control plane of `make kube`.

BENCH_DIR := build/bench
BENCH_PKGS := wrk nginx-light jq curl sqlite3 libsqlite3-dev python3 linux-perf

.PHONY: bench bench-ab bench-deps bench-tools
bench: deps bench-deps all bench-tools kube node-deps
	@tests/bench/run.sh $(BIN) $(BENCH_DIR) $(BENCH_DIR)

# Row 3 for several podresd builds side by side, in sets with the raw loop
# (tests/bench/ab.sh): make bench-ab AB="bin/podresd /tmp/other/podresd"
AB ?= $(BIN)/podresd
AB_SETS ?= 5
AB_CLIENTS ?= 16
bench-ab: deps bench-deps all bench-tools
	@tests/bench/ab.sh $(BENCH_DIR) $(AB_SETS) $(AB_CLIENTS) $(AB)

bench-deps:
	@tools/deps.sh -t bench-deps $(BENCH_PKGS)

bench-tools: $(BENCH_DIR)/podbench $(BENCH_DIR)/sqlite_commit $(BENCH_DIR)/lib_floor \
	$(BENCH_DIR)/empty_extender \
	$(BENCH_DIR)/nohist/podresd

# Rows H1 (tests/bench/history.sh): podresd from the same sources without the
# history triggers (-DPODRES_NO_HISTORY, store_int.h), the reference of the
# PUT rate with history. Only the bench builds it.
$(BENCH_DIR)/nohist/podresd: $(SERVER_SRCS) $(COMMON_SRCS) server/main.c $(SCHEMA) $(wildcard server/*.h)
	$(Q)$(MAKE) --no-print-directory B=build/nohist BIN=build/nohist/bin \
		CFLAGS="$(CFLAGS) -DPODRES_NO_HISTORY" build/nohist/bin/podresd
	@mkdir -p $(dir $@)
	$(Q)cp build/nohist/bin/podresd $@

$(BENCH_DIR)/podbench: tests/bench/podbench.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O2 -Wall -Wextra -o $@ $< -lpthread

$(BENCH_DIR)/sqlite_commit: tests/bench/sqlite_commit.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -o $@ $< \
		$(shell pkg-config --cflags --libs sqlite3 2>/dev/null || echo -lsqlite3)

# Linked exactly like podres-syncer (LDLIBS_SYNCER): the reference of row 6e.
$(BENCH_DIR)/lib_floor: tests/bench/lib_floor.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O2 -Wall -Wextra $(shell pkg-config --cflags $(SYNCER_PKGS)) -o $@ $< \
		$(LDLIBS_SYNCER)

# The reference of rows 9: an extender that parses and echoes (tests/bench/extender.sh).
$(BENCH_DIR)/empty_extender: tests/bench/empty_extender.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O2 -Wall -Wextra $(shell pkg-config --cflags libmicrohttpd jansson) -o $@ $< \
		$(shell pkg-config --libs libmicrohttpd jansson)
