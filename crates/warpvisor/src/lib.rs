//! warpvisor: runs many copies of one WebAssembly program as virtual machines in one
//! data-parallel kernel (VectorVisor's design; see `ARCHITECTURE.md` for the map).
//!
//! The pipeline: [`frontend`] (bytes → validated module) → [`analysis`] (call graph, yields,
//! liveness) → [`codegen`] (kernel source) → [`backend`] (device program) → [`vmm`] (the fleet of
//! VMs: layout, instantiation, invocation, hypercalls). [`runner`] runs jobs on a fleet or on
//! wasmtime alike; [`wast`] runs spec-test scripts; [`simt`] predicts how a fleet would run
//! on SIMT hardware from traces of its VMs. [`limits`] lists what warpvisor refuses to
//! translate, and why.

pub mod abi;
pub mod analysis;
pub mod backend;
pub mod codegen;
pub mod frontend;
pub mod jobs;
pub mod layout;
pub mod limits;
pub mod profile;
pub mod ptx;
pub mod riscv;
pub mod runner;
pub mod serve;
pub mod simt;
pub mod vmm;
pub mod wasi;
pub mod wast;
pub mod work_queue;
