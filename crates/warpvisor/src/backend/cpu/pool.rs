//! The worker threads of the `cpu` backend, reused across launches: a rayon pool of fixed
//! size. A launch broadcasts one job to every worker and returns when all have finished; a
//! panic in a job reaches the caller as an error after the others finish, so a launch can
//! neither deadlock nor leave a thread behind.

use rayon::{ThreadPool, ThreadPoolBuilder};

/// Persistent worker threads.
pub struct WorkerPool {
    pool: ThreadPool,
}

impl WorkerPool {
    /// Starts `n` workers (at least one), each with a stack of
    /// [`WORKER_STACK_BYTES`](super::WORKER_STACK_BYTES) for direct calls' recursion.
    pub fn new(n: usize) -> Result<Self, String> {
        let pool = ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .thread_name(|w| format!("warpvisor-worker-{w}"))
            .stack_size(super::WORKER_STACK_BYTES)
            .start_handler(|_| super::direct::note_worker_stack())
            .build()
            .map_err(|e| format!("cannot start {n} worker threads: {e}"))?;
        Ok(WorkerPool { pool })
    }

    /// Whether the calling thread is one of the workers.
    pub fn is_worker(&self) -> bool {
        self.pool.current_thread_index().is_some()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `job(w)` for `w` in `0..n` (`n` at most [`WorkerPool::workers`]), one per worker,
    /// and waits for all of them; `Err` if one panicked.
    pub fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.pool.broadcast(|ctx| {
                if ctx.index() < n {
                    job(ctx.index());
                }
            })
        }))
        .map(|_| ())
        .map_err(|p| {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            format!("a worker thread panicked: {what}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_worker_runs_once_per_launch_and_threads_are_reused() {
        let pool = WorkerPool::new(3).unwrap_or_else(|e| panic!("{e}"));
        let count = AtomicUsize::new(0);
        for _ in 0..100 {
            let r = pool.run(3, &|_| {
                count.fetch_add(1, Ordering::SeqCst);
            });
            assert_eq!(r, Ok(()));
        }
        assert_eq!(count.load(Ordering::SeqCst), 300);
        assert_eq!(pool.workers(), 3);
    }

    #[test]
    fn a_panicking_job_is_an_error_and_the_pool_goes_on() {
        let pool = WorkerPool::new(2).unwrap_or_else(|e| panic!("{e}"));
        let r = pool.run(2, &|w| assert_ne!(w, 1, "worker one fails"));
        assert!(r.is_err_and(|e| e.contains("panicked")));
        let count = AtomicUsize::new(0);
        let r = pool.run(2, &|_| {
            count.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!((r, count.load(Ordering::SeqCst)), (Ok(()), 2));
    }
}
