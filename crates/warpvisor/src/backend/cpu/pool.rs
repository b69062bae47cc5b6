//! A pool of worker threads reused across launches: a launch wakes the workers, each runs its
//! share of the VMs, and the caller waits for the last one. No thread is created per launch.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

type Job = &'static (dyn Fn(usize) + Sync);

struct State {
    generation: u64,
    job: Option<(Job, usize)>,
    running: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    start: Condvar,
    done: Condvar,
}

/// Persistent worker threads.
pub struct WorkerPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    launch: Mutex<()>,
}

impl WorkerPool {
    /// Starts `n` workers.
    pub fn new(n: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                generation: 0,
                job: None,
                running: 0,
                shutdown: false,
            }),
            start: Condvar::new(),
            done: Condvar::new(),
        });
        let threads = (0..n)
            .filter_map(|w| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("warpvisor-worker-{w}"))
                    .spawn(move || worker(w, &shared))
                    .ok()
            })
            .collect();
        WorkerPool {
            shared,
            threads,
            launch: Mutex::new(()),
        }
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.threads.len().max(1)
    }

    /// Runs `job(w)` on workers `0..n` and waits for all of them.
    pub fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        if self.threads.is_empty() {
            for w in 0..n {
                job(w);
            }
            return;
        }
        let _one_launch_at_a_time = self.launch.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `run` does not return before every worker has finished with `job`, so
        // extending its lifetime is never observed.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(job) };
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.job = Some((job, n.min(self.threads.len())));
        st.running = n.min(self.threads.len());
        st.generation += 1;
        self.shared.start.notify_all();
        while st.running > 0 {
            st = self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.job = None;
    }
}

fn worker(index: usize, shared: &Shared) {
    let mut seen = 0u64;
    loop {
        let job = {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            while st.generation == seen && !st.shutdown {
                st = shared.start.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.shutdown {
                return;
            }
            seen = st.generation;
            st.job
        };
        if let Some((job, n)) = job {
            if index < n {
                job(index);
                let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                st.running -= 1;
                if st.running == 0 {
                    shared.done.notify_all();
                }
            }
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.shutdown = true;
        }
        self.shared.start.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_worker_runs_once_per_launch_and_threads_are_reused() {
        let pool = WorkerPool::new(3);
        let count = AtomicUsize::new(0);
        for _ in 0..100 {
            pool.run(3, &|_| {
                count.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(count.load(Ordering::SeqCst), 300);
        assert_eq!(pool.workers(), 3);
    }
}
