//! Generates `include/syrah.h` from the exported API with cbindgen.
//! The header is committed; the test suite fails when it differs from a
//! fresh generation.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    // A cdylib exports only its `#[no_mangle]` functions (rustc writes the
    // version script: a second one would clash with it), all named
    // syrah_*; the library gets a soname.
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsyrah.so.{major}");
    // Never unmapped by dlclose: runtime threads may still be parked in the
    // library's code, and its process-wide state (the OpenCL entry points,
    // devices, caches) must stay reachable.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    let config = match cbindgen::Config::from_file(dir.join("cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => panic!("cbindgen.toml: {e}"),
    };
    let bindings = match cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
    {
        Ok(b) => b,
        Err(e) => panic!("generating the C header failed: {e}"),
    };
    let target = dir.join("include").join("syrah.h");
    // write_to_file leaves the file untouched when its content is the same.
    bindings.write_to_file(target);
}
