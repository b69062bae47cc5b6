//! RISC-V tools for the tests that assemble programs: qemu-user (the oracle) and the
//! assembler and linker of Debian's `binutils-riscv64-linux-gnu`.

use std::path::Path;
use std::process::Command;

/// Whether qemu and the RISC-V assembler and linker are here; CI requires them
/// (`WARPVISOR_REQUIRE_RISCV_TOOLS=1`), elsewhere a test without them prints `NOT RUN`.
pub fn tools_here() -> bool {
    let here = [
        "qemu-riscv64",
        "riscv64-linux-gnu-as",
        "riscv64-linux-gnu-ld",
    ]
    .iter()
    .all(|t| {
        Command::new(t)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !here {
        assert!(
            !std::env::var("WARPVISOR_REQUIRE_RISCV_TOOLS").is_ok_and(|v| v == "1"),
            "qemu-riscv64 and riscv64 binutils are required (apt-get install -y qemu-user binutils-riscv64-linux-gnu)"
        );
        eprintln!("NOT RUN: qemu-riscv64 or riscv64 binutils not found");
    }
    here
}

/// Assembles and links `asm` (RV64IMA) into a static executable at `path`, entered at `_start`.
pub fn link(asm: &str, path: &Path) {
    let obj = path.with_extension("o");
    let src = path.with_extension("s");
    std::fs::write(&src, asm).unwrap();
    let ok = Command::new("riscv64-linux-gnu-as")
        .args(["-march=rv64ima"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("riscv64-linux-gnu-ld")
            .args(["-static", "-e", "_start"])
            .arg(&obj)
            .arg("-o")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
    assert!(ok, "assembling {}", src.display());
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&obj);
}
