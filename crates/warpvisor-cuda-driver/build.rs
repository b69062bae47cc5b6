//! The shared library answers to `libcuda.so` once loaded: a later `dlopen("libcuda.so")`
//! (cudarc's) finds it by this SONAME instead of searching the disk.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so");
}
