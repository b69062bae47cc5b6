//! The C side of the kernel ABI, generated from [`super::codes`] and [`super::fleet`]: the
//! declarations every kernel's prelude starts with and the dialects' entry points. Each struct
//! is followed by `WV_STATIC_ASSERT`s of its size and every field's offset as Rust computed
//! them, so a C compiler that lays it out differently fails the kernel's build.

use std::fmt::Write;

use super::codes::{KERNEL_TRAPS, STATUS_CODES};
use super::fleet::{
    CField, FleetAbi, HostLaunch, ImageLayout, PerVmArray, VmControl, DIRTY_PAGE_SHIFT,
    FRAME_HEADER, NO_FRAME, NULL_REF,
};
use crate::codegen::Dialect;
use crate::layout::GUARD_BYTES;

/// The ABI part of the prelude: codes, constants, `wv_vm`, `wv_fleet`, the per-VM accessors
/// and the image offsets. Needs the dialect block and the module constants before it.
pub fn declarations() -> String {
    let mut out = String::from(
        "/* ---- kernel ABI (generated from warpvisor::abi) ---- */\n\
         #ifndef WV_OFFSETOF\n#define WV_OFFSETOF(t, m) __builtin_offsetof(t, m)\n#endif\n",
    );
    out.push_str("/* VM status codes (abi::status). */\n");
    for (name, code, doc) in STATUS_CODES {
        let _ = writeln!(out, "#define WV_{name} {code}u /* {doc} */");
    }
    out.push_str("/* Trap codes (abi::KERNEL_TRAPS); 0 is no trap. */\n");
    for (i, (kind, name)) in KERNEL_TRAPS.iter().enumerate() {
        let _ = writeln!(out, "#define WV_TRAP_{name} {}u /* {kind} */", i + 1);
    }
    let _ = writeln!(
        out,
        "/* A null reference (funcref or externref); references are 32-bit. */\n\
         #define WV_NULL_REF 0x{NULL_REF:x}u\n\
         /* The saved-frame link of an entry frame: there is no caller to return to. */\n\
         #define WV_NO_FRAME 0x{NO_FRAME:x}u\n\
         /* Words of a frame header: caller's frame, function id, resume point. */\n\
         #define WV_FRAME_HEADER {FRAME_HEADER}u\n\
         /* log2 of the bytes per entry of a fleet's dirty-page map (wv_fleet.dirty). */\n\
         #define WV_DIRTY_SHIFT {DIRTY_PAGE_SHIFT}u\n\
         /* Inaccessible bytes after a VM's 4 GiB of addresses with guard regions. */\n\
         #define WV_GUARD_BYTES {GUARD_BYTES}ull\n"
    );

    struct_decl(
        &mut out,
        "wv_vm",
        VmControl::FIELDS,
        std::mem::size_of::<VmControl>(),
    );
    out.push_str("#if WV_HOST\n");
    out.push_str(
        "/* On the host the fleet is passed as this struct (abi::HostLaunch): the fleet's fields \
         (abi::FleetAbi), then the host's services (abi::HostServices). */\n",
    );
    struct_decl(
        &mut out,
        "wv_fleet",
        &HostLaunch::fields(),
        std::mem::size_of::<HostLaunch>(),
    );
    out.push_str("#else\n");
    out.push_str("/* On a device the entry assembles it from its parameters (same fields). */\n");
    struct_fields(&mut out, "wv_fleet", FleetAbi::FIELDS);
    out.push_str("#endif\n\n");

    out.push_str(
        "/* Per-VM arrays (abi::PerVmArray): contiguous per VM, or word-interleaved. */\n",
    );
    out.push_str("#if WV_INTERLEAVE == 0\n");
    for a in PerVmArray::ALL {
        let _ = writeln!(out, "{}", a.c_macro(false));
    }
    out.push_str("#else\n");
    for a in PerVmArray::ALL {
        let _ = writeln!(out, "{}", a.c_macro(true));
    }
    out.push_str("#endif\n");
    out.push_str("/* The instantiation image (abi::ImageLayout). */\n");
    out.push_str(&ImageLayout::c_macros());
    out
}

fn struct_fields(out: &mut String, name: &str, fields: &[CField]) {
    out.push_str("typedef struct {\n");
    for f in fields {
        let decl = if f.pointer {
            format!("WV_GLOBAL {} *{};", f.c_type, f.name)
        } else {
            format!("{} {};", f.c_type, f.name)
        };
        let _ = writeln!(out, "  {decl:<34} /* {} */", f.doc.trim());
    }
    let _ = writeln!(out, "}} {name};");
}

fn struct_decl(out: &mut String, name: &str, fields: &[CField], size: usize) {
    struct_fields(out, name, fields);
    let _ = writeln!(
        out,
        "WV_STATIC_ASSERT(sizeof({name}) == {size}, {name}_size);"
    );
    for f in fields {
        let _ = writeln!(
            out,
            "WV_STATIC_ASSERT(WV_OFFSETOF({name}, {0}) == {1}, {name}_{0});",
            f.name, f.offset
        );
    }
}

/// The entry points of a kernel in `dialect`, after the trampoline: `wv_run_vm` (admit a VM
/// the host handed back, then run it) and the launch and reset entries.
pub fn entry_points(dialect: Dialect) -> String {
    let mut out = String::from(
        "\n/* ---- entry points (generated from warpvisor::abi) ---- */\n\
         /* Admits a VM the host handed back (ENTRY, RESUME), then runs it while it runs. */\n\
         WV_FN void wv_run_vm(wv_fleet *f, uint32_t vm) {\n\
         \x20 wv_admit(f, vm);\n\
         \x20 if (f->vms[vm].status == WV_RUNNING) WV_RUN_TRAMPOLINE(f, vm);\n\
         }\n",
    );
    match dialect {
        Dialect::C => out.push_str(
            "/* Runs VMs first, first + step, ... below end (one worker's share). */\n\
             void wv_launch(wv_fleet *f, uint32_t first, uint32_t end, uint32_t step) {\n\
             \x20 for (uint32_t vm = first; vm < end; vm += step) wv_run_vm(f, vm);\n\
             }\n\
             /* Puts VMs first, first + step, ... below end back to the image. */\n\
             void wv_reset_launch(wv_fleet *f, uint32_t first, uint32_t end, uint32_t step) {\n\
             \x20 for (uint32_t vm = first; vm < end; vm += step) wv_reset_vm(f, vm);\n\
             }\n",
        ),
        Dialect::OpenCl => {
            let vm = "(uint32_t)get_global_id(0)";
            device_entry(
                &mut out,
                "__kernel void",
                "__global",
                "wv_kernel",
                vm,
                "wv_run_vm",
            );
            device_entry(
                &mut out,
                "__kernel void",
                "__global",
                "wv_reset",
                vm,
                "wv_reset_vm",
            );
        }
        Dialect::Cuda => {
            let q = "extern \"C\" __global__ void";
            let vm = "blockIdx.x * blockDim.x + threadIdx.x";
            device_entry(&mut out, q, "", "wv_kernel", vm, "wv_run_vm");
            device_entry(&mut out, q, "", "wv_reset", vm, "wv_reset_vm");
        }
    }
    out
}

/// One device entry: the fleet's fields as parameters, one thread per VM.
fn device_entry(out: &mut String, qualifier: &str, space: &str, name: &str, vm: &str, run: &str) {
    let params: Vec<String> = FleetAbi::FIELDS
        .iter()
        .map(|f| match (f.pointer, space) {
            (true, "") => format!("{} *{}", f.c_type, f.name),
            (true, space) => format!("{space} {} *{}", f.c_type, f.name),
            (false, _) => format!("{} {}", f.c_type, f.name),
        })
        .collect();
    let _ = writeln!(out, "{qualifier} {name}({}) {{", params.join(", "));
    let _ = writeln!(out, "  uint32_t vm = {vm};");
    let _ = writeln!(out, "  if (vm >= num_vms) return;");
    out.push_str("  wv_fleet fl;\n ");
    for f in FleetAbi::FIELDS {
        let _ = write!(out, " fl.{0} = {0};", f.name);
    }
    let _ = writeln!(
        out,
        "\n  if (mem_host != 0) fl.mem = ({space} uint8_t *)(size_t)mem_host;\n  {run}(&fl, vm);\n}}"
    );
}

/// The names of the entry parameters in order (what backends pass).
pub fn param_names() -> Vec<&'static str> {
    FleetAbi::FIELDS.iter().map(|f| f.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::FleetBuffer;

    /// The buffers come first among the parameters, in [`FleetBuffer::ALL`]'s order.
    #[test]
    fn parameters_follow_the_buffer_order() {
        let names = param_names();
        for (i, b) in FleetBuffer::ALL.iter().enumerate() {
            assert_eq!(names[i], b.name());
        }
        assert_eq!(names.len(), FleetBuffer::ALL.len() + 6);
    }
}
