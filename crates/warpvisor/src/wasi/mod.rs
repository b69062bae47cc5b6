//! WASI preview1 (`wasi_snapshot_preview1`) served by the host, per VM: arguments and
//! environment, captured standard streams, clocks, randomness, `proc_exit`, and preopened
//! directories confined to their sandbox (`fs.rs`).

pub mod errno;
mod fs;
mod guest;
pub mod program;
pub mod suite;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use errno::*;
use fs::{Fd, FdTable};
use guest::GuestMemory;

use crate::frontend::{ExportKind, Module};
use crate::vmm::{FleetBuffers, HostFunctions, HostStop, Imports, TrapKind, Value, VmmError};

/// The import module WASI preview1 functions come from.
pub const MODULE: &str = "wasi_snapshot_preview1";

/// The WASI functions warpvisor serves.
pub const FUNCTIONS: &[&str] = &[
    "args_get",
    "args_sizes_get",
    "environ_get",
    "environ_sizes_get",
    "clock_res_get",
    "clock_time_get",
    "fd_advise",
    "fd_allocate",
    "fd_close",
    "fd_datasync",
    "fd_fdstat_get",
    "fd_fdstat_set_flags",
    "fd_fdstat_set_rights",
    "fd_filestat_get",
    "fd_filestat_set_size",
    "fd_filestat_set_times",
    "fd_pread",
    "fd_prestat_dir_name",
    "fd_prestat_get",
    "fd_pwrite",
    "fd_read",
    "fd_readdir",
    "fd_renumber",
    "fd_seek",
    "fd_sync",
    "fd_tell",
    "fd_write",
    "path_create_directory",
    "path_filestat_get",
    "path_filestat_set_times",
    "path_link",
    "path_open",
    "path_readlink",
    "path_remove_directory",
    "path_rename",
    "path_symlink",
    "path_unlink_file",
    "poll_oneoff",
    "proc_exit",
    "proc_raise",
    "random_get",
    "sched_yield",
    "sock_accept",
    "sock_recv",
    "sock_send",
    "sock_shutdown",
];

/// What one VM runs with: its job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WasiJob {
    /// Arguments after the program name.
    pub args: Vec<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Standard input.
    pub stdin: Vec<u8>,
}

/// What one VM produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WasiOutput {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

/// The WASI state of one VM.
struct VmState {
    argv: Vec<String>,
    env: Vec<String>,
    stdin: Vec<u8>,
    stdin_pos: usize,
    out: WasiOutput,
    fds: FdTable,
}

/// The WASI state of a whole fleet, shared between the fleet's host and its owner.
pub struct WasiState {
    program_name: String,
    preopens: Vec<(PathBuf, String)>,
    vms: Vec<VmState>,
    started: std::time::Instant,
}

impl WasiState {
    /// A state for `num_vms` VMs of program `program_name` with directories `preopens`
    /// (`(host, guest)` pairs).
    pub fn new(program_name: &str, preopens: Vec<(PathBuf, String)>, num_vms: u32) -> Self {
        let mut s = WasiState {
            program_name: program_name.to_string(),
            preopens,
            vms: Vec::new(),
            started: std::time::Instant::now(),
        };
        s.set_jobs(&vec![WasiJob::default(); num_vms as usize]);
        s
    }

    /// Gives VM i job `jobs[i]` (fresh streams and descriptors).
    pub fn set_jobs(&mut self, jobs: &[WasiJob]) {
        self.vms = jobs
            .iter()
            .map(|j| VmState {
                argv: std::iter::once(self.program_name.clone())
                    .chain(j.args.iter().cloned())
                    .collect(),
                env: j.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                stdin: j.stdin.clone(),
                stdin_pos: 0,
                out: WasiOutput::default(),
                fds: FdTable::new(&self.preopens),
            })
            .collect();
    }

    /// Takes VM `vm`'s output.
    pub fn take_output(&mut self, vm: usize) -> WasiOutput {
        self.vms
            .get_mut(vm)
            .map(|v| std::mem::take(&mut v.out))
            .unwrap_or_default()
    }
}

/// Binds the imports of `module`: WASI functions to `state`; any other import is an error
/// naming it, unless `allow_unknown` makes calls to it trap.
pub fn link(
    module: &Module<'_>,
    state: Arc<Mutex<WasiState>>,
    allow_unknown: bool,
) -> Result<Imports, VmmError> {
    let mut calls = Vec::new();
    for (name, kind) in &module.imports {
        let known = name.module == MODULE && FUNCTIONS.contains(&name.name.as_str());
        match kind {
            ExportKind::Func(_) if known => calls.push(Some(name.name.clone())),
            ExportKind::Func(_) if allow_unknown => calls.push(None),
            _ => {
                return Err(VmmError::UnknownImport {
                    module: name.module.clone(),
                    name: name.name.clone(),
                })
            }
        }
    }
    Ok(Imports {
        host: Box::new(WasiHost { calls, state }),
        ..Imports::default()
    })
}

/// The hypercall handler.
struct WasiHost {
    /// For each imported function, its WASI name (`None`: unknown, traps).
    calls: Vec<Option<String>>,
    state: Arc<Mutex<WasiState>>,
}

fn arg(args: &[Value], i: usize) -> u32 {
    match args.get(i) {
        Some(Value::I32(v)) => *v as u32,
        Some(Value::I64(v)) => *v as u32,
        _ => 0,
    }
}

fn arg64(args: &[Value], i: usize) -> u64 {
    match args.get(i) {
        Some(Value::I64(v)) => *v as u64,
        Some(Value::I32(v)) => *v as u32 as u64,
        _ => 0,
    }
}

impl HostFunctions for WasiHost {
    fn call(
        &mut self,
        fleet: &mut FleetBuffers,
        vm: u32,
        import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        let Some(Some(name)) = self.calls.get(import as usize) else {
            return Err(HostStop::Trap(TrapKind::HostError));
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let started = state.started;
        let vm_state = state
            .vms
            .get_mut(vm as usize)
            .ok_or(HostStop::Trap(TrapKind::HostError))?;
        let mut mem = GuestMemory::new(fleet, vm);
        let errno = match name.as_str() {
            "proc_exit" => return Err(HostStop::Exit(arg(args, 0))),
            "proc_raise" => return Err(HostStop::Trap(TrapKind::HostError)),
            other => dispatch(other, vm_state, &mut mem, args, started),
        };
        Ok(vec![Value::I32(errno as i32)])
    }
}

fn ok(r: Result<(), Errno>) -> Errno {
    r.err().unwrap_or(SUCCESS)
}

/// Writes a list of strings the way `args_get`/`environ_get` do.
fn put_strings(
    mem: &mut GuestMemory<'_>,
    list: &[String],
    ptrs: u32,
    buf: u32,
) -> Result<(), Errno> {
    let mut at = buf;
    for (i, s) in list.iter().enumerate() {
        mem.set_u32(ptrs + 4 * i as u32, at)?;
        let mut bytes = s.as_bytes().to_vec();
        bytes.push(0);
        mem.write(at, &bytes)?;
        at += bytes.len() as u32;
    }
    Ok(())
}

fn sizes(mem: &mut GuestMemory<'_>, list: &[String], count: u32, size: u32) -> Result<(), Errno> {
    mem.set_u32(count, list.len() as u32)?;
    mem.set_u32(size, list.iter().map(|s| s.len() as u32 + 1).sum())
}

fn now_ns(id: u32, started: std::time::Instant) -> Result<u64, Errno> {
    match id {
        0 => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)),
        1..=3 => Ok(started.elapsed().as_nanos() as u64 + 1),
        _ => Err(INVAL),
    }
}

fn random_bytes(n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut b = vec![0u8; n];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let mut x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        for v in b.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x as u8;
        }
    }
    b
}

fn dispatch(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
    started: std::time::Instant,
) -> Errno {
    match name {
        "args_sizes_get" => ok(sizes(mem, &st.argv, arg(a, 0), arg(a, 1))),
        "args_get" => ok(put_strings(mem, &st.argv, arg(a, 0), arg(a, 1))),
        "environ_sizes_get" => ok(sizes(mem, &st.env, arg(a, 0), arg(a, 1))),
        "environ_get" => ok(put_strings(mem, &st.env, arg(a, 0), arg(a, 1))),
        "clock_res_get" => ok(match arg(a, 0) {
            0..=3 => mem.set_u64(arg(a, 1), 1),
            _ => Err(INVAL),
        }),
        "clock_time_get" => ok(now_ns(arg(a, 0), started).and_then(|t| mem.set_u64(arg(a, 2), t))),
        "random_get" => ok(mem.write(arg(a, 0), &random_bytes(arg(a, 1) as usize))),
        "sched_yield" => SUCCESS,
        "poll_oneoff" => ok(poll_oneoff(
            st,
            mem,
            arg(a, 0),
            arg(a, 1),
            arg(a, 2),
            arg(a, 3),
        )),
        "sock_accept" | "sock_recv" | "sock_send" | "sock_shutdown" => {
            match st.fds.get(arg(a, 0)) {
                Ok(_) => NOTSOCK,
                Err(e) => e,
            }
        }
        _ => ok(fd_call(name, st, mem, a)),
    }
}

/// `poll_oneoff`: descriptors are always ready; clock subscriptions wait (up to one second).
fn poll_oneoff(
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    subs: u32,
    events: u32,
    n: u32,
    nevents: u32,
) -> Result<(), Errno> {
    if n == 0 {
        return Err(INVAL);
    }
    let mut ready = Vec::new();
    let mut clocks = Vec::new();
    for i in 0..n {
        let s = mem.read(subs + 48 * i, 48)?;
        let userdata = u64::from_le_bytes(s[0..8].try_into().map_err(|_| FAULT)?);
        let tag = s[8];
        match tag {
            0 => {
                let timeout = u64::from_le_bytes(s[24..32].try_into().map_err(|_| FAULT)?);
                clocks.push((userdata, timeout));
            }
            1 | 2 => {
                let fd = u32::from_le_bytes(s[16..20].try_into().map_err(|_| FAULT)?);
                let (err, nbytes) = match st.fds.get(fd) {
                    Ok(Fd::Stdin) => (SUCCESS, (st.stdin.len() - st.stdin_pos) as u64),
                    Ok(_) => (SUCCESS, 0),
                    Err(e) => (e, 0),
                };
                ready.push((userdata, err, tag, nbytes));
            }
            _ => return Err(INVAL),
        }
    }
    if ready.is_empty() {
        let wait = clocks
            .iter()
            .map(|c| c.1)
            .min()
            .unwrap_or(0)
            .min(1_000_000_000);
        std::thread::sleep(std::time::Duration::from_nanos(wait));
        for (u, _) in &clocks {
            ready.push((*u, SUCCESS, 0, 0));
        }
    }
    for (i, (userdata, err, tag, nbytes)) in ready.iter().enumerate() {
        let mut e = [0u8; 32];
        e[0..8].copy_from_slice(&userdata.to_le_bytes());
        e[8..10].copy_from_slice(&err.to_le_bytes());
        e[10] = *tag;
        e[16..24].copy_from_slice(&nbytes.to_le_bytes());
        mem.write(events + 32 * i as u32, &e)?;
    }
    mem.set_u32(nevents, ready.len() as u32)
}

mod calls;
use calls::fd_call;
