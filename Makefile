# The two commands: `make run` and `make test`. Everything else is a building block.
# Each target installs missing Debian packages first (scripts/install-deps.sh, silent if present).
.PHONY: deps deps-run build run package check test test-release test-asan test-tsan test-fuzz test-soak test-abuse bench bench-report clean

JOBS ?= $(shell nproc)
CONF ?= conf/

deps:
	@scripts/install-deps.sh

# What `make run` needs: the compiler, CMake, Ninja and the libraries the binary links. No test,
# benchmark or fuzz tooling, and no server packages.
deps-run:
	@scripts/install-deps.sh --run

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

# Only the lionet binary and what it links (preset "app": no tests, benchmarks or examples).
run: deps-run
	@cmake --preset app >/dev/null
	@cmake --build --preset app -j $(JOBS)
	./build/app/bin/lionet -c $(CONF)

# The Debian packages lionet and lionet-dev (packaging/) into build/release/packages/, then lintian.
package: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS) --target lionet lionet_app lionet_package_files
	cd build/release && cpack -G DEB
	lintian --tag-display-limit 0 build/release/packages/*.deb

# The quick loop: the release build and every release test (7-8 minutes from a fresh clone on
# 2 CPUs, under 2 after touching one library file). `make test` is the whole gate CI runs.
check: build
	ctest --preset release -j $(JOBS)

test: test-release test-asan test-tsan test-fuzz test-soak test-abuse

test-release: check

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

# libFuzzer targets (tests/fuzz/, made by the asan build), FUZZ_SECONDS each, under ASan+UBSan
# (clang), one per CPU at once.
FUZZ_SECONDS ?= 30
test-fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

# The lionet binary under mixed load (HTTP, HTTPS, echo, storage) for SOAK_MINUTES, watched for
# client errors, RSS/fd growth and lost records (scripts/soak.sh).
SOAK_MINUTES ?= 1.5
test-soak: build
	scripts/soak.sh $(SOAK_MINUTES) --no-build

# Connection flood (20,000 against a 10,000 limit) and slowloris (2,000) against the binary,
# twice each, with a probe client that must keep being served (scripts/abuse.sh).
test-abuse: build
	scripts/abuse.sh --no-build

bench: build
	scripts/bench-fiber.sh --no-build
	scripts/bench-sync.sh --no-build
	scripts/bench-echo.sh --no-build

# Every benchmark with its references, bench/RESULTS.md and the charts in bench/charts/ (~1 h).
bench-report: deps
	scripts/bench-report.sh

clean:
	rm -rf build
