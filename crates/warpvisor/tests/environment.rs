//! Child processes (the `cpu` backend's C compiler) start safely while C code adds to the
//! environment under `backend::environment::changing`, as PoCL does while it lists devices.
//! Its own test binary: the C `setenv` calls here would race with anything else in the process
//! that reads the environment.

use std::ffi::CString;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use warpvisor::backend::environment::{changing, output};

/// Without the lock in `output`, most of these starts fail with `EFAULT` ("Bad address") on
/// glibc: `setenv` moves `environ` and frees the array a starting child is handed.
#[test]
fn children_start_while_c_code_adds_variables() {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Batches of new names (adding is what moves `environ`), the lock let go between
            // them so that children can start; bounded, so the environment stays small.
            for batch in 0..250u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                {
                    let _changing = changing();
                    for i in 0..20 {
                        let name =
                            CString::new(format!("WV_ENVIRONMENT_TEST_{batch}_{i}")).unwrap();
                        // SAFETY: both strings are NUL-terminated; nothing else in this process
                        // reads the environment while the test runs, and every child start
                        // waits for the lock this thread holds.
                        unsafe { libc::setenv(name.as_ptr(), c"1".as_ptr(), 1) };
                    }
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let failures: Vec<String> = (0..200)
            .filter_map(|_| match output(&mut Command::new("true")) {
                Ok(out) if out.status.success() => None,
                Ok(out) => Some(format!("exited with {}", out.status)),
                Err(e) => Some(e.to_string()),
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        assert!(
            failures.is_empty(),
            "{} of 200 starts failed, first: {:?}",
            failures.len(),
            failures.first()
        );
    });
}
