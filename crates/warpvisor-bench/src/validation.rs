//! The check every number waits for: each platform's replies must be the native build's,
//! byte for byte (stdout, stderr, exit code, trap).

use warpvisor::wasi::program::JobResult;

/// The native build's reply to a request: what the WASI program would print for it.
pub fn native_reply(result: Result<Vec<u8>, warpvisor_workloads::WorkloadError>) -> JobResult {
    match result {
        Ok(stdout) => JobResult {
            exit_code: 0,
            stdout,
            stderr: Vec::new(),
            trap: None,
        },
        // What `warpvisor_workloads::serve` prints and returns for a bad request.
        Err(e) => JobResult {
            exit_code: 1,
            stdout: Vec::new(),
            stderr: format!("bad request: {e}\n").into_bytes(),
            trap: None,
        },
    }
}

/// Why the reference itself is unusable: a request the native build did not serve.
pub fn check_reference(reference: &[JobResult]) -> Result<(), String> {
    match reference.iter().position(|r| r.exit_code != 0) {
        None => Ok(()),
        Some(i) => Err(format!(
            "the native build failed request {i}: {}",
            String::from_utf8_lossy(&reference[i].stderr).trim()
        )),
    }
}

/// `Ok` when `replies` equal `reference`; otherwise the first difference, described.
pub fn compare(reference: &[JobResult], replies: &[JobResult]) -> Result<(), String> {
    if reference.len() != replies.len() {
        return Err(format!(
            "{} replies for {} requests",
            replies.len(),
            reference.len()
        ));
    }
    for (i, (want, got)) in reference.iter().zip(replies).enumerate() {
        if want == got {
            continue;
        }
        let what = if want.exit_code != got.exit_code || want.trap != got.trap {
            format!(
                "exit code {} (trap {:?}), expected {}; stderr: {}",
                got.exit_code,
                got.trap.map(|t| t.to_string()),
                want.exit_code,
                excerpt(&got.stderr)
            )
        } else if want.stdout != got.stdout {
            format!("stdout {}", first_difference(&want.stdout, &got.stdout))
        } else {
            format!("stderr {}", first_difference(&want.stderr, &got.stderr))
        };
        return Err(format!("request {i}: {what}"));
    }
    Ok(())
}

fn first_difference(want: &[u8], got: &[u8]) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    format!(
        "differs at byte {at} of {} (expected {}, got {})",
        want.len(),
        want.get(at)
            .map_or("the end".into(), |b| format!("{b:#04x}")),
        got.get(at)
            .map_or("the end".into(), |b| format!("{b:#04x}")),
    )
}

fn excerpt(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpvisor::vmm::TrapKind;

    fn ok(bytes: &[u8]) -> JobResult {
        native_reply(Ok(bytes.to_vec()))
    }

    #[test]
    fn identical_replies_pass_and_every_kind_of_difference_is_named() {
        let reference = vec![ok(b"abc"), ok(b"de")];
        assert_eq!(compare(&reference, &reference.clone()), Ok(()));
        let e = compare(&reference, &[ok(b"abc"), ok(b"dx")]).unwrap_err();
        assert_eq!(
            e,
            "request 1: stdout differs at byte 1 of 2 (expected 0x65, got 0x78)"
        );
        let e = compare(&reference, &[ok(b"abcd"), ok(b"de")]).unwrap_err();
        assert!(
            e.contains("byte 3 of 3 (expected the end, got 0x64)"),
            "{e}"
        );
        let trapped = JobResult {
            exit_code: 134,
            stdout: Vec::new(),
            stderr: b"panicked".to_vec(),
            trap: Some(TrapKind::Unreachable),
        };
        let e = compare(&reference, &[ok(b"abc"), trapped]).unwrap_err();
        assert!(e.starts_with("request 1: exit code 134"), "{e}");
        assert!(e.contains("unreachable") && e.contains("panicked"), "{e}");
        assert!(compare(&reference, &reference[..1]).is_err());
        let mut noisy = ok(b"abc");
        noisy.stderr = b"warning".to_vec();
        assert!(compare(&reference[..1], &[noisy])
            .unwrap_err()
            .contains("stderr"));
    }

    #[test]
    fn a_failed_native_request_spoils_the_reference() {
        let bad = native_reply(Err(warpvisor_workloads::WorkloadError::new("short")));
        assert_eq!(bad.stderr, b"bad request: short\n");
        assert!(check_reference(&[ok(b"x"), bad])
            .unwrap_err()
            .contains("request 1"));
        assert!(check_reference(&[ok(b"x")]).is_ok());
    }
}
