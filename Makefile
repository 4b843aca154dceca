# samebits: two commands on a fresh machine.
#   make run    installs what is missing, builds, runs the main job on the bundled data
#   make test   same set-up, then the full test suite through CTest
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
DEBIAN_PACKAGES := cmake g++ make git libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev \
                   nlohmann-json3-dev libcli11-dev libxxhash-dev

.PHONY: run test deps build bench clean
.PHONY: test-sanitize deps-sanitize
SANITIZE_PACKAGES := clang-14 libclang-rt-14-dev ninja-build ccache

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "samebits: installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./scripts/main_job.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build
	$(BUILD)/bench/samebits_bench_cpu

clean:
	rm -rf $(BUILD)

# The CPU tests under ASan+UBSan (all) and TSan (the threaded subset: thread pool through the ops,
# data loader, plan cache, the mode's guards, the atomic variants), then each reader's fuzzer for
# 60 s (CMakePresets.json and docs/testing.md say what each covers).
deps-sanitize: deps
	@missing=""; for p in $(SANITIZE_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

FUZZ_SECONDS ?= 60
test-sanitize: deps-sanitize build
	cmake --preset asan && cmake --build --preset asan && ctest --preset asan
	cmake --preset tsan && cmake --build --preset tsan && ctest --preset tsan
	./fuzz/build.sh $(BUILD) build-fuzz && ./fuzz/run.sh build-fuzz $(FUZZ_SECONDS)
