//! The process environment, shared between child processes and C libraries that change it.
//!
//! PoCL calls C's `setenv` while it lists its devices (`HWLOC_PLUGINS_PATH`, in
//! `pocl_topology_detect_device_info`), outside Rust's own environment lock. Adding a variable
//! makes glibc move the `environ` array and free the old one, so a child process started at
//! that moment on another thread (the `cpu` backend's C compiler) hands `execve` a freed
//! environment and fails with `EFAULT` ("Bad address"): seen in test binaries that open
//! `cpu` and `opencl` fleets side by side. Code that lets a C library change the environment
//! holds [`changing`]; every child process warpvisor starts is spawned through [`output`].
//! A program that embeds warpvisor beside other such libraries can hold [`changing`] around
//! their calls too.

use std::io;
use std::process::{Command, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static PROCESS_ENVIRONMENT: RwLock<()> = RwLock::new(());

/// Held while foreign code may add to the environment (OpenCL platform enumeration): no child
/// process starts meanwhile.
pub fn changing() -> RwLockWriteGuard<'static, ()> {
    PROCESS_ENVIRONMENT
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Held while a child process starts; many may start at once.
fn spawning() -> RwLockReadGuard<'static, ()> {
    PROCESS_ENVIRONMENT
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `command` to completion with its standard output and error captured, like
/// [`Command::output`], but starts it only while no foreign code is changing the environment.
/// The lock covers the start alone, not the wait.
pub fn output(command: &mut Command) -> io::Result<Output> {
    let child = {
        let _environment = spawning();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?
    };
    child.wait_with_output()
}
