//! `poll_oneoff`: descriptors are always ready; clock subscriptions park the VM.
//!
//! A VM that must wait is never slept on the service thread: the call answers
//! [`Poll::Park`] with the instant its first clock fires, the fleet parks the VM at its
//! hypercall and keeps running and serving the others, and makes the call again when it is
//! due. The absolute deadlines computed on the first call are kept in the VM's state, so a
//! relative timeout is measured from the original call, not from the retry.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::errno::*;
use super::fs::Fd;
use super::guest::GuestMemory;
use super::VmState;

/// Bytes of a `subscription` and of an `event`.
const SUBSCRIPTION: u32 = 48;
const EVENT: u32 = 32;

/// What a `poll_oneoff` call did.
pub enum Poll {
    /// Events were written; the call returns.
    Done,
    /// No subscription is ready: call again at this instant.
    Park(Instant),
}

/// One decoded subscription.
struct Subscription {
    userdata: u64,
    tag: u8,
    /// Clocks: when it fires (`None`: never, for a timeout past what an `Instant` holds).
    deadline: Option<Instant>,
    /// Descriptors: the event's flags (hang-up at the end of a file).
    flags: u16,
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// When a clock subscription fires: `id` 0 (realtime) or 1 (monotonic, counted from
/// `started`); `abstime` per the subscription flags. Other clocks are `INVAL`, as in wasmtime.
fn clock_deadline(
    id: u32,
    timeout: u64,
    abstime: bool,
    started: Instant,
    now: Instant,
) -> Result<Option<Instant>, Errno> {
    let relative = match (id, abstime) {
        (0 | 1, false) => timeout,
        (1, true) => {
            return Ok(started.checked_add(Duration::from_nanos(timeout.saturating_sub(1))))
        }
        (0, true) => {
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64);
            timeout.saturating_sub(wall)
        }
        _ => return Err(INVAL),
    };
    Ok(now.checked_add(Duration::from_nanos(relative)))
}

/// `poll_oneoff(subs, events, n, nevents)` for VM state `st`.
pub fn poll_oneoff(
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    (subs, events, n, nevents): (u32, u32, u32, u32),
    started: Instant,
) -> CallResult<Poll> {
    if n == 0 {
        return Err(INVAL.into());
    }
    mem.charge_array(n, SUBSCRIPTION)?;
    mem.charge_array(n, EVENT)?;
    let now = Instant::now();
    let pending = st.poll_deadlines.take();
    let mut list = Vec::new();
    for i in 0..n {
        let at = i
            .checked_mul(SUBSCRIPTION)
            .and_then(|o| subs.checked_add(o))
            .ok_or(CallError::Trap)?;
        mem.check(at, SUBSCRIPTION as u64, 8)?;
        let s = mem.read(at, SUBSCRIPTION)?;
        let (userdata, tag) = (le_u64(&s, 0), s[8]);
        let mut sub = Subscription {
            userdata,
            tag,
            deadline: None,
            flags: 0,
        };
        match tag {
            0 => {
                let id = u32::from_le_bytes([s[16], s[17], s[18], s[19]]);
                let abstime = s[40] & 1 != 0;
                sub.deadline = match pending.as_ref().and_then(|p| p.get(i as usize)) {
                    Some(d) => *d,
                    None => clock_deadline(id, le_u64(&s, 24), abstime, started, now)?,
                };
            }
            1 | 2 => {
                let fd = u32::from_le_bytes([s[16], s[17], s[18], s[19]]);
                sub.flags = match (tag, st.fds.get(fd)?) {
                    (1, Fd::Stdin) => 0,
                    (1, Fd::File { file, .. }) => {
                        use std::io::Seek;
                        let pos = file.stream_position().unwrap_or(0);
                        let len = file.metadata().map_or(0, |m| m.len());
                        // FD_READWRITE_HANGUP at the end of the file.
                        u16::from(len <= pos)
                    }
                    (2, Fd::Stdout | Fd::Stderr | Fd::File { .. }) => 0,
                    _ => return Err(BADF.into()),
                };
            }
            _ => return Err(INVAL.into()),
        }
        list.push(sub);
    }
    let ready = |s: &Subscription| s.tag != 0 || s.deadline.is_some_and(|d| d <= now);
    if !list.iter().any(ready) {
        let wake = list
            .iter()
            .filter_map(|s| s.deadline)
            .min()
            // Only clocks that never fire: look again in an hour (a `--timeout` ends it).
            .unwrap_or(now + Duration::from_secs(3600));
        st.poll_deadlines = Some(list.iter().map(|s| s.deadline).collect());
        return Ok(Poll::Park(wake));
    }
    let mut count = 0u32;
    for s in list.iter().filter(|s| ready(s)) {
        let mut e = [0u8; EVENT as usize];
        e[0..8].copy_from_slice(&s.userdata.to_le_bytes());
        e[10] = s.tag;
        let nbytes = u64::from(s.tag != 0);
        e[16..24].copy_from_slice(&nbytes.to_le_bytes());
        e[24..26].copy_from_slice(&s.flags.to_le_bytes());
        let at = count
            .checked_mul(EVENT)
            .and_then(|o| events.checked_add(o))
            .ok_or(CallError::Trap)?;
        mem.write_aligned(at, &e, 8)?;
        count += 1;
    }
    mem.set_u32(nevents, count)?;
    Ok(Poll::Done)
}
