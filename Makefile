# Convenience wrapper around CMake for the common commands.
#   make            build (build/)
#   make check      install missing packages, build, run every test
#   make demo       train the Fashion-MNIST example (installs the data when missing, as root)
#   make demo-cli   the command-line tour: examples/demo.sh with build/tgraph
#   make asan       build and test under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       build and run the thread pool and VM tests under ThreadSanitizer
#   make bench      build the benchmarks and run them beside NumPy (bench/run.sh)
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps check demo demo-cli asan tsan bench install clean

all: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/Makefile:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

deps:
	@sh scripts/deps.sh

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
	cmake --build build-tsan -j $(JOBS) --target test_pool test_vm
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -R 'test_pool|test_vm'

bench: all
	cmake --build $(BUILD) -j $(JOBS) --target bench_w1 bench_w5 bench_pool
	sh bench/run.sh $(BUILD)

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan
