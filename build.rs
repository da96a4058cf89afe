//! Generates the C header of the MQD interface from `test-harness/abi/src/types.rs` and `src/ffi.rs`.
//!
//! The header goes to `OUT_DIR/mpi_interface.h`; the checked-in copy in
//! `include/` is compared with it by `tests/header.rs`. Refresh it with
//! `MQD_REFRESH_HEADER=1 cargo build` (see docs/layout.md).

use std::env;
use std::path::PathBuf;

fn main() {
    let crate_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("mpi_interface.h");
    println!("cargo:rerun-if-changed=test-harness/abi/src/types.rs");
    println!("cargo:rerun-if-changed=src/ffi.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=MQD_REFRESH_HEADER");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is valid");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("test-harness/abi/src/types.rs"))
        .with_src(crate_dir.join("src/ffi.rs"))
        .generate()
        .expect("the ABI module is valid input for cbindgen");
    bindings.write_to_file(&out);
    if env::var_os("MQD_REFRESH_HEADER").is_some() {
        bindings.write_to_file(crate_dir.join("include/mpi_interface.h"));
    }
}
