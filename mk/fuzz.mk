# fuzz.mk - libFuzzer targets (tests/fuzz/fuzz_<name>.c, seeds in
# tests/fuzz/corpus/<name>/), built with clang -fsanitize=fuzzer,address,
# undefined into build/fuzz/ from the same sources as the daemons.
#   make fuzz [FUZZ_SECONDS=300] [FUZZ_TARGETS="validate config"]  each target N s
#   make fuzz-smoke                                                 each target 30 s
#   make fuzz-build                                                 build only
# New inputs go to build/fuzz/corpus/<name>/ (the seeds stay untouched);
# a crash leaves build/fuzz/artifacts/<name>-crash-* and fails the target.

FUZZ_SECONDS ?= 300
FUZZ_CC ?= clang
FZ := build/fuzz
FUZZ_ALL := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
              $(filter-out -Werror,$(WARN)) -Wno-missing-prototypes \
              -DPODRES_VERSION='"$(BUILD_VERSION)"' -I$(B)/gen \
              $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_GEN := $(B)/server/migrations_gen.c $(B)/server/ui_gen.c $(PROTO_C)
FUZZ_LIB_SRCS := $(COMMON_SRCS) $(KUBE_SRCS) $(SERVER_SRCS) $(SYNCER_SRCS) $(EXTENDER_SRCS)
FUZZ_OBJS := $(FUZZ_LIB_SRCS:%.c=$(FZ)/%.o) $(FZ)/gen/migrations_gen.o $(FZ)/gen/ui_gen.o \
             $(PROTO_C:$(B)/gen/%.c=$(FZ)/gen/%.o)

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-deps
fuzz-deps:
	@tools/deps.sh -t fuzz-deps clang libclang-rt-14-dev

$(FZ)/%.o: %.c | $(PROTO_C)
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  FUZZ-CC $<"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<
$(FZ)/gen/%_gen.o: $(B)/server/%_gen.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<
$(FZ)/gen/%.pb-c.o: $(B)/gen/%.pb-c.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-shadow -c -o $@ $<
$(FZ)/libfuzzdeps.a: $(FUZZ_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^
$(FZ)/fuzz_%: tests/fuzz/fuzz_%.c $(FZ)/libfuzzdeps.a
	@test "$(V)" = 1 || echo "  FUZZ-LD $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FZ)/libfuzzdeps.a \
		$(LDLIBS_ALL)

fuzz-build: fuzz-deps deps $(FUZZ_GEN) $(FUZZ_TARGETS:%=$(FZ)/fuzz_%)

fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FZ)/corpus/$$t $(FZ)/artifacts; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(FZ)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix=$(FZ)/artifacts/$$t- \
			$(FZ)/corpus/$$t tests/fuzz/corpus/$$t > $(FZ)/$$t.log 2>&1 || \
			{ tail -n 60 $(FZ)/$$t.log; echo "fuzz: $$t FAILED"; exit 1; }; \
		grep -E '^(stat::number_of_executed_units|#[0-9]+ *DONE)' $(FZ)/$$t.log | tail -n 2; \
		echo "fuzz: $$t clean"; \
	done

fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=30
