# Convenience wrapper around CMake for the common commands.
#   make            build (build/)
#   make check      install missing packages, build, run every test
#   make demo       train the Fashion-MNIST example (installs the data when missing, as root)
#   make demo-cli   the command-line tour: examples/demo.sh with build/tgraph
#   make asan       build and test under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       run the pool, VM, memory-cap, debug-mode, concurrent-call, device, scheduler and
#                   pmap, collectives and pmap gradient tests under ThreadSanitizer
#   make fuzz       build the libFuzzer targets (clang, build-fuzz/); then run one with
#                   tests/fuzz/run.sh TARGET SECONDS (docs/hardening.md)
#   make bench      run W1-W13 and PE beside NumPy, PyTorch and C: bench/results.md (bench/run.sh);
#                   installs PyTorch (python3-torch) when missing, as root
#   make python     build the Python package in place (python/tgraph): then
#                   PYTHONPATH=python /usr/bin/python3 -c 'import tgraph' (docs/python.md)
#   make format     reformat every C file with clang-format; make format-check only checks
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps python check demo demo-cli asan tsan fuzz bench format format-check install clean

all: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/Makefile:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

deps:
	@sh scripts/deps.sh

python: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target python

check: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo:
	@sh scripts/deps.sh demo
	@$(MAKE) --no-print-directory all
	$(BUILD)/example_fashion_mnist --out $(BUILD)

demo-cli: deps all
	sh examples/demo.sh $(BUILD)/tgraph

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTG_SANITIZE=address,undefined $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTG_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS) --target test_pool test_vm test_memcap test_debug test_call_exec test_blas \
		test_replicas test_device test_sched test_pmap test_comm test_collective test_pmap_grad
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure \
		-R 'test_pool|test_vm|test_memcap|test_debug|test_call_exec|test_blas$$|test_replicas|test_device|test_sched|test_pmap|test_comm|test_collective|test_pmap_grad'

fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DTG_FUZZ=ON $(CMAKE_FLAGS)
	cmake --build build-fuzz -j $(JOBS) --target fuzz_parse fuzz_npy fuzz_pipeline \
		$$(grep -q fuzz_idx build-fuzz/Makefile 2>/dev/null && echo fuzz_idx)

bench:
	@sh scripts/deps.sh bench || echo "make bench: the peers whose packages are missing are skipped"
	@$(MAKE) --no-print-directory all
	sh bench/run.sh $(BUILD)

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

format-check:
	@command -v clang-format >/dev/null || { echo "format-check needs clang-format" >&2; exit 1; }
	git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
