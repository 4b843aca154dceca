# samebits: two commands on a fresh machine.
#   make run    installs what is missing, builds, runs the main job on the bundled data
#   make test   same set-up, then the full test suite through CTest
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
# WERROR=1 (CI) builds with -Werror.
WERROR ?= 0
CMAKE_FLAGS = $(CMAKE_ARGS) $(if $(filter 1,$(WERROR)),-DSAMEBITS_WERROR=ON)
CLANG_FORMAT ?= clang-format-14
DEBIAN_PACKAGES := cmake g++ make git libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev \
                   nlohmann-json3-dev libcli11-dev libxxhash-dev \
                   python3-dev python3-venv ccache ninja-build \
                   libopenmpi-dev openmpi-bin

.PHONY: run test deps build bench baseline clean format-check venv python pytest
.PHONY: test-sanitize deps-sanitize test-asan-ci
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

# ccache (a Debian package above, so looked for after deps) serves every compiler call.
LAUNCHER = $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
             -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(LAUNCHER) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./scripts/main_job.sh $(BUILD)

test: build python
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600
	$(MAKE) pytest

# The Python package: a project-local virtual environment with torch (pinned to the GPU machine's
# 2.11), built into it from the main build tree (scikit-build-core reuses $(BUILD), so the library
# is not compiled twice), then its tests.
.PHONY: venv python pytest
VENV ?= .venv
PY := $(VENV)/bin/python
# nvidia-cuda-cuobjdump and -nvdisasm: the SASS that bench/sass_round_trips.py checks (CTest).
PIP_PACKAGES := torch==2.11.* torch-geometric pytest numpy nanobind scikit-build-core \
                nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
# The stamp names the package list, so that a venv made before a package was added gets it.
VENV_STAMP := $(VENV)/.samebits-venv-$(shell echo '$(PIP_PACKAGES)' | md5sum | cut -c1-8)
venv: $(VENV_STAMP)
$(VENV_STAMP): | deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIP_PACKAGES)
	touch $@

python: build venv
	CMAKE_GENERATOR="$$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' $(BUILD)/CMakeCache.txt)" \
	  $(PY) -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=$(BUILD) \
	  -Ccmake.define.SAMEBITS_BUILD_TESTS=ON -Ccmake.define.SAMEBITS_BUILD_BENCH=ON .

pytest:
	$(PY) -m pytest -q python/tests

bench: build
	$(BUILD)/bench/samebits_bench_cpu

# bench/BASELINE.md from the newest run under bench/results/ (or BASELINE_RUN=bench/results/<run>)
BASELINE_RUN ?= $(shell ls -d bench/results/*/ | sort -V | tail -1)
baseline:
	python3 bench/summarize.py $(BASELINE_RUN) > bench/BASELINE.md

clean:
	rm -rf $(BUILD) $(VENV)

# Every C++ and CUDA source as clang-format 14 writes it (.clang-format); installs it if missing.
format-check:
	@command -v $(CLANG_FORMAT) >/dev/null || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq clang-format-14; }
	git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs $(CLANG_FORMAT) --dry-run --Werror

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
# CI's share of the sanitizers: the backend-ops harness (every op, layout, option and level), the
# readers, the round trips, the plan cache and the registry under ASan + UBSan (about 6 minutes on
# 2 cores from a cold cache).
test-asan-ci: deps
	cmake --preset asan && cmake --build --preset asan-ci && ctest --preset asan-ci

test-sanitize: deps-sanitize build
	cmake --preset asan && cmake --build --preset asan && ctest --preset asan
	cmake --preset tsan && cmake --build --preset tsan && ctest --preset tsan
	./fuzz/build.sh $(BUILD) build-fuzz && ./fuzz/run.sh build-fuzz $(FUZZ_SECONDS)
