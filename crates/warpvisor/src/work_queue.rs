//! One work queue over job indices, drained by a few threads: the loop the WASI suite, the
//! `wast` command and the wasmtime backend's worker pool all run.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f(i)` for every `i` in `0..jobs` on `workers` threads (at least one, at most `jobs`),
/// each taking the next index when it finishes one, and returns the results in index order.
/// A panic in `f` is resumed on the calling thread once every worker has stopped.
pub fn map_indexed<R: Send>(jobs: usize, workers: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let workers = workers.clamp(1, jobs.max(1));
    let mut results: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= jobs {
                            break;
                        }
                        mine.push((i, f(i)));
                    }
                    mine
                })
            })
            .collect();
        let mut all = Vec::with_capacity(jobs);
        let mut panic = None;
        for h in handles {
            match h.join() {
                Ok(mut part) => all.append(&mut part),
                Err(p) => panic = panic.or(Some(p)),
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
        all
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// The threads to use by default: one per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn results_come_in_index_order_and_every_index_runs_once() {
        let seen = Mutex::new(Vec::new());
        let out = map_indexed(100, 7, |i| {
            seen.lock().unwrap().push(i);
            i * 2
        });
        assert_eq!(out, (0..100).map(|i| i * 2).collect::<Vec<_>>());
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn no_jobs_and_zero_workers_are_fine() {
        assert!(map_indexed(0, 0, |i| i).is_empty());
        assert_eq!(map_indexed(3, 0, |i| i), vec![0, 1, 2]);
    }

    #[test]
    fn a_panicking_job_reaches_the_caller() {
        let r = std::panic::catch_unwind(|| map_indexed(10, 3, |i| assert!(i != 5, "job 5")));
        assert!(r.is_err());
    }
}
