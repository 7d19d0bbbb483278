//! The thin binary: install the error hooks, parse, hand over to the CLI.
#![forbid(unsafe_code)]

fn main() {
    // Panics and unexpected errors get color-eyre's report; expected errors never reach it.
    let _ = color_eyre::install();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            settle::tell!("settle: cannot start: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(settle::cli::run(std::env::args().collect()));
    std::process::exit(code);
}
