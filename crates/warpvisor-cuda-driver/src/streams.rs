//! Streams and events. A stream runs what is queued on it — launches, and waits for other
//! streams' events — in order on a thread of its own, so `cuLaunchKernel` returns at once, as
//! CUDA's does: the host goes on while the kernel runs (copies on another stream, a host
//! thread answering a kernel through mapped memory). Copies and memsets run on the calling
//! thread once the work they are ordered after has finished; a stream's launch error is
//! reported by the next call that waits for it.
//!
//! The legacy default stream (the null handle, `CU_STREAM_LEGACY`, and here also
//! `CU_STREAM_PER_THREAD`) is ordered with every blocking stream: its work waits for theirs
//! and theirs for its. Streams created with `CU_STREAM_NON_BLOCKING` are ordered only with
//! themselves.

use std::collections::VecDeque;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use crate::device::*;

/// `CU_STREAM_NON_BLOCKING`.
const NON_BLOCKING: c_uint = 1;
/// `CUDA_ERROR_NOT_READY`.
pub(crate) const NOT_READY: CUresult = 600;
/// `CUDA_ERROR_LAUNCH_FAILED`.
const LAUNCH_FAILED: CUresult = 719;
/// How many completion times a stream keeps for its events.
const FINISH_TIMES: usize = 1024;

/// Work queued on a stream; its result is the stream's error if it is not `SUCCESS`.
pub(crate) type Job = Box<dyn FnOnce() -> CUresult + Send>;

/// What a stream has done: the jobs queued and finished (numbered from 1), the first error
/// not yet reported, and when recent jobs finished.
#[derive(Default)]
struct Progress {
    submitted: u64,
    completed: u64,
    error: Option<CUresult>,
    finished: VecDeque<(u64, Instant)>,
}

/// One stream: its progress, and the sender of its thread's queue (`None` until the first job,
/// and after `cuStreamDestroy`).
pub(crate) struct Stream {
    non_blocking: bool,
    progress: Mutex<Progress>,
    changed: Condvar,
    queue: Mutex<Option<Sender<Job>>>,
}

/// Every stream created, for the waits of the legacy stream and `cuCtxSynchronize`.
static STREAMS: Mutex<Vec<Weak<Stream>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Stream {
    fn create(non_blocking: bool) -> Arc<Stream> {
        let s = Arc::new(Stream {
            non_blocking,
            progress: Mutex::new(Progress::default()),
            changed: Condvar::new(),
            queue: Mutex::new(None),
        });
        let mut all = lock(&STREAMS);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&s));
        s
    }

    /// The number the next job will finish as: jobs queued so far.
    fn submitted(&self) -> u64 {
        lock(&self.progress).submitted
    }

    /// Queues `job` after the stream's earlier jobs and, first, after `after` (other streams'
    /// jobs up to a number). Returns at once.
    fn submit(self: &Arc<Self>, after: Vec<(Arc<Stream>, u64)>, job: Job) -> CUresult {
        let mut queue = lock(&self.queue);
        if queue.is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("cuda-stream".into())
                .spawn(move || {
                    for job in rx {
                        // A panic must not end the thread with the job unfinished: every later
                        // wait would hang. It fails the launch instead.
                        let rc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                            .unwrap_or(LAUNCH_FAILED);
                        let mut p = lock(&me.progress);
                        p.completed += 1;
                        if rc != SUCCESS && p.error.is_none() {
                            p.error = Some(rc);
                        }
                        let n = p.completed;
                        p.finished.push_back((n, Instant::now()));
                        if p.finished.len() > FINISH_TIMES {
                            p.finished.pop_front();
                        }
                        me.changed.notify_all();
                    }
                });
            if spawned.is_err() {
                return OUT_OF_MEMORY;
            }
            *queue = Some(tx);
        }
        let Some(tx) = queue.as_ref() else {
            return INVALID_HANDLE;
        };
        lock(&self.progress).submitted += 1;
        let job: Job = Box::new(move || {
            for (s, n) in &after {
                s.wait_for(*n);
            }
            job()
        });
        if tx.send(job).is_err() {
            // The thread is gone (it cannot panic: jobs return codes); count the job as failed.
            let mut p = lock(&self.progress);
            p.completed += 1;
            p.error.get_or_insert(UNKNOWN);
            self.changed.notify_all();
            return UNKNOWN;
        }
        SUCCESS
    }

    /// Waits until job `n` has finished.
    fn wait_for(&self, n: u64) {
        let mut p = lock(&self.progress);
        while p.completed < n {
            p = self.changed.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits for every job queued so far; returns (and forgets) the first error among them.
    fn synchronize(&self) -> CUresult {
        let n = self.submitted();
        self.wait_for(n);
        lock(&self.progress).error.take().unwrap_or(SUCCESS)
    }

    /// When job `n` finished, if it has and the stream still remembers.
    fn finished_at(&self, n: u64) -> Option<Instant> {
        let p = lock(&self.progress);
        p.finished.iter().find(|(k, _)| *k == n).map(|(_, t)| *t)
    }

    fn is_legacy(self: &Arc<Self>) -> bool {
        Arc::ptr_eq(self, legacy())
    }

    /// The other streams' jobs that work queued on this stream now must follow: with the
    /// legacy stream, every blocking stream's; with a blocking stream, the legacy stream's.
    fn ordered_after(self: &Arc<Self>) -> Vec<(Arc<Stream>, u64)> {
        if self.non_blocking {
            return Vec::new();
        }
        if self.is_legacy() {
            return live_streams()
                .into_iter()
                .filter(|s| !s.non_blocking && !Arc::ptr_eq(s, self))
                .map(|s| {
                    let n = s.submitted();
                    (s, n)
                })
                .collect();
        }
        let l = legacy().clone();
        let n = l.submitted();
        vec![(l, n)]
    }
}

fn live_streams() -> Vec<Arc<Stream>> {
    lock(&STREAMS).iter().filter_map(Weak::upgrade).collect()
}

/// The legacy default stream.
fn legacy() -> &'static Arc<Stream> {
    static LEGACY: OnceLock<Arc<Stream>> = OnceLock::new();
    LEGACY.get_or_init(|| Stream::create(false))
}

/// The stream a handle names.
///
/// # Safety
/// `s` is null, a default-stream constant or a handle from `cuStreamCreate` not destroyed.
unsafe fn stream(s: *mut c_void) -> Arc<Stream> {
    match s as usize {
        0..=2 => legacy().clone(),
        _ => (*(s as *const Arc<Stream>)).clone(),
    }
}

/// Queues `job` on stream `s`, ordered as CUDA orders work on it.
///
/// # Safety
/// As for [`stream`].
pub(crate) unsafe fn enqueue(s: *mut c_void, job: Job) -> CUresult {
    let st = stream(s);
    let after = st.ordered_after();
    st.submit(after, job)
}

/// Waits for the work that a copy or memset on stream `s` (null: a synchronous one, on the
/// legacy stream) is ordered after; returns the first launch error among it.
///
/// # Safety
/// As for [`stream`].
pub(crate) unsafe fn settle(s: *mut c_void) -> CUresult {
    let st = stream(s);
    let mut rc = SUCCESS;
    for (other, n) in st.ordered_after() {
        other.wait_for(n);
        if let Some(e) = lock(&other.progress).error.take() {
            rc = if rc == SUCCESS { e } else { rc };
        }
    }
    let e = st.synchronize();
    if rc == SUCCESS {
        e
    } else {
        rc
    }
}

/// Waits for every stream; returns the first error any of them reports.
pub(crate) fn synchronize_all() -> CUresult {
    let mut rc = SUCCESS;
    for s in live_streams() {
        let e = s.synchronize();
        if rc == SUCCESS {
            rc = e;
        }
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(s: *mut *mut c_void, flags: c_uint) -> CUresult {
    if s.is_null() {
        return INVALID_VALUE;
    }
    let stream = Stream::create(flags & NON_BLOCKING != 0);
    *s = Box::into_raw(Box::new(stream)) as *mut c_void;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    s: *mut *mut c_void,
    flags: c_uint,
    _p: c_int,
) -> CUresult {
    cuStreamCreate(s, flags)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(s: *mut c_void) -> CUresult {
    if (s as usize) <= 2 {
        return INVALID_HANDLE;
    }
    let st = Box::from_raw(s as *mut Arc<Stream>);
    // CUDA lets queued work finish after the handle goes; here it finishes first, then the
    // stream's thread ends with its queue.
    st.synchronize();
    lock(&st.queue).take();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(s: *mut c_void) -> CUresult {
    settle(s)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(s: *mut c_void) -> CUresult {
    let st = stream(s);
    let p = lock(&st.progress);
    if p.completed < p.submitted {
        NOT_READY
    } else {
        SUCCESS
    }
}

/// An event: the stream and job it was recorded after, and when.
struct Event {
    recorded: Mutex<Option<(Arc<Stream>, u64, Instant)>>,
}

impl Event {
    fn get(&self) -> Option<(Arc<Stream>, u64, Instant)> {
        lock(&self.recorded).clone()
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent(s: *mut c_void, e: *mut c_void, _f: c_uint) -> CUresult {
    if e.is_null() {
        return INVALID_HANDLE;
    }
    let st = stream(s);
    match (*(e as *const Event)).get() {
        Some((other, n, _)) if !Arc::ptr_eq(&other, &st) => {
            st.submit(vec![(other, n)], Box::new(|| SUCCESS))
        }
        _ => SUCCESS,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(e: *mut *mut c_void, _flags: c_uint) -> CUresult {
    if e.is_null() {
        return INVALID_VALUE;
    }
    let event = Event {
        recorded: Mutex::new(None),
    };
    *e = Box::into_raw(Box::new(event)) as *mut c_void;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(e: *mut c_void, s: *mut c_void) -> CUresult {
    if e.is_null() {
        return INVALID_HANDLE;
    }
    let st = stream(s);
    let n = st.submitted();
    *lock(&(*(e as *const Event)).recorded) = Some((st, n, Instant::now()));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(e: *mut c_void) -> CUresult {
    if e.is_null() {
        return INVALID_HANDLE;
    }
    if let Some((st, n, _)) = (*(e as *const Event)).get() {
        st.wait_for(n);
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(e: *mut c_void) -> CUresult {
    if e.is_null() {
        return INVALID_HANDLE;
    }
    match (*(e as *const Event)).get() {
        Some((st, n, _)) if lock(&st.progress).completed < n => NOT_READY,
        _ => SUCCESS,
    }
}

/// When an event was reached: when the job it follows finished, or when it was recorded if
/// that was later; `None` while the job runs.
unsafe fn reached(e: *mut c_void) -> Result<Instant, CUresult> {
    match (*(e as *const Event)).get() {
        None => Err(INVALID_HANDLE),
        Some((st, n, at)) => {
            if lock(&st.progress).completed < n {
                return Err(NOT_READY);
            }
            Ok(st.finished_at(n).map_or(at, |f| f.max(at)))
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> CUresult {
    if ms.is_null() || start.is_null() || end.is_null() {
        return INVALID_VALUE;
    }
    let (a, b) = (tri!(reached(start)), tri!(reached(end)));
    *ms = b.saturating_duration_since(a).as_secs_f32() * 1e3;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(e: *mut c_void) -> CUresult {
    if !e.is_null() {
        drop(Box::from_raw(e as *mut Event));
    }
    SUCCESS
}
