//! The AFL++ entry point: `MQD_FUZZ_TARGET=<dll|elf|core|tables>`, built and run by
//! scripts/fuzz-campaign with `cargo afl`.

fn main() {
    let name = std::env::var("MQD_FUZZ_TARGET").unwrap_or_default();
    let Some(target) = mqd_fuzz::Target::from_name(&name) else {
        eprintln!("mqd-fuzz-afl: set MQD_FUZZ_TARGET to dll, elf, core or tables");
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| mqd_fuzz::run(target, data));
}
