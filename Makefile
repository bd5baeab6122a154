# Convenience wrapper around CMake for the common commands.
#   make            build (build/)
#   make check      install missing packages, build, run every test
#   make demo       build and run the shipped example end to end
#   make asan       build and test under AddressSanitizer + UndefinedBehaviorSanitizer
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps check demo asan install clean

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

demo: deps all
	sh examples/demo.sh $(BUILD)/tgraph

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTG_SANITIZE=address,undefined $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan
