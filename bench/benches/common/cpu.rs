//! CPU time beside wall time for every benchmark variant.
//!
//! A runtime that spins can win a latency figure while taking a core from
//! everything else on the machine, so each variant also records the
//! process's CPU time (every thread: the runtime's workers, its helper
//! threads, the client side) per iteration. [`Group::bench`] runs the
//! routine in criterion's timed loop (`iter_custom`, the same loop `iter`
//! runs) and reads `CLOCK_PROCESS_CPUTIME_ID` around it; the totals over
//! warm-up and measurement go to
//! `<target>/criterion/<group>/<variant>/cpu.json` (`iters`, `cpu_ns`,
//! `wall_ns`), which the `report` binary prints as CPU per iteration and
//! cores busy.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};

/// A criterion group whose variants also record their CPU time.
pub struct Group<'a> {
    name: String,
    inner: BenchmarkGroup<'a, WallTime>,
}

impl<'a> Group<'a> {
    pub fn new(c: &'a mut Criterion, name: &str) -> Group<'a> {
        Group {
            name: name.to_string(),
            inner: c.benchmark_group(name),
        }
    }

    #[allow(dead_code)] // not every bench binary uses it
    pub fn throughput(&mut self, t: Throughput) {
        self.inner.throughput(t);
    }

    /// Criterion's group, for its other settings.
    #[allow(dead_code)] // not every bench binary uses it
    pub fn inner(&mut self) -> &mut BenchmarkGroup<'a, WallTime> {
        &mut self.inner
    }

    /// Benchmarks `f` as variant `variant` (criterion's `bench_function`
    /// with `iter`), recording its CPU time as well.
    pub fn bench<O>(&mut self, variant: impl Into<String>, mut f: impl FnMut() -> O) {
        let variant = variant.into();
        let mut totals = Totals::default();
        let group = &self.name;
        self.inner.bench_function(&variant, |b| {
            b.iter_custom(|iters| {
                let cpu = process_cpu();
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(f());
                }
                let wall = start.elapsed();
                totals.add(iters, process_cpu().saturating_sub(cpu), wall);
                wall
            })
        });
        totals.write(group, &variant);
    }

    pub fn finish(self) {
        self.inner.finish();
    }
}

#[derive(Default)]
struct Totals {
    iters: u64,
    cpu: Duration,
    wall: Duration,
}

impl Totals {
    fn add(&mut self, iters: u64, cpu: Duration, wall: Duration) {
        self.iters += iters;
        self.cpu += cpu;
        self.wall += wall;
    }

    fn write(&self, group: &str, variant: &str) {
        if self.iters == 0 {
            return;
        }
        let dir = spargio_bench::target_dir()
            .join("criterion")
            .join(group)
            .join(variant);
        let json = format!(
            "{{\"iters\": {}, \"cpu_ns\": {}, \"wall_ns\": {}}}\n",
            self.iters,
            self.cpu.as_nanos(),
            self.wall.as_nanos()
        );
        if std::fs::create_dir_all(&dir).is_ok() {
            let _ = std::fs::write(dir.join("cpu.json"), json);
        }
    }
}

/// CPU time of the whole process so far (all threads).
pub fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
