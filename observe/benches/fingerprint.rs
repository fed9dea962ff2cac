//! The check an installation fingerprint makes before each deciding run, when nothing
//! changed: on a `node_modules` of about 30,000 files (300 packages of 100 files in
//! nested directories, built once), and on a real directory when `TDD_BENCH_SITE`
//! names one (a venv's or an interpreter's `site-packages`).
//!
//! Run: `cargo bench -p tdd-observe --bench fingerprint`, or
//! `TDD_BENCH_SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])') cargo bench -p tdd-observe --bench fingerprint`.

use std::hint::black_box;
use std::path::Path;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use tdd_observe::hermetic::InstallPin;
use tdd_observe::hermetic::InstallWatch;
use tdd_observe::hermetic::Share;

/// Writes `packages` packages of 100 small files each under `root`.
fn node_modules(root: &Path, packages: usize) {
    for p in 0..packages {
        for d in 0..5 {
            let dir = root.join(format!("pkg-{p}/lib/part-{d}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for f in 0..20 {
                std::fs::write(
                    dir.join(format!("m{f}.js")),
                    format!("module.exports = {f};\n"),
                )
                .expect("write");
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("node_modules");
    node_modules(&root, 300);
    // Files changed this close to the fingerprint have their bytes hashed too; the
    // steady state of a real run is an installation older than that.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let pin = InstallPin::take(&root, "dependency directory").expect("pin");
    let name = format!("unchanged node_modules of {} entries", pin.entries);
    c.bench_function(&name, |b| {
        b.iter(|| assert!(black_box(pin.first_change(Share::EveryCore)).is_none()));
    });
    watched(c, &pin, &name);
    if let Some(site) = std::env::var_os("TDD_BENCH_SITE") {
        let pin = InstallPin::take(Path::new(&site), "site-packages").expect("pin");
        let name = format!(
            "unchanged {} of {} entries",
            Path::new(&site).display(),
            pin.entries
        );
        c.bench_function(&name, |b| {
            b.iter(|| assert!(black_box(pin.first_change(Share::EveryCore)).is_none()));
        });
        watched(c, &pin, &name);
    }
}

/// The walk beside a runner (every core but one) as a close makes it: plain, and
/// watching what it walks, with the watches' removal; then the check after the runs
/// that the watch spares a second walk.
fn watched(c: &mut Criterion, pin: &InstallPin, name: &str) {
    let beside = Share::BesideARunner;
    c.bench_function(&format!("{name}, beside a runner"), |b| {
        b.iter(|| assert!(black_box(pin.first_change(beside)).is_none()));
    });
    c.bench_function(&format!("{name}, beside a runner, watched"), |b| {
        b.iter(|| {
            let watch = InstallWatch::new();
            assert!(black_box(pin.first_change_watched(beside, &watch)).is_none());
        });
    });
    let watch = InstallWatch::new();
    assert!(pin.first_change_watched(beside, &watch).is_none());
    c.bench_function(&format!("{name}, after the runs, watched"), |b| {
        b.iter(|| assert!(black_box(pin.held_by(&watch))));
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
