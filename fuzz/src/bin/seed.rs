//! Write the seed corpus of every fuzz target, cut out of the conformance vectors:
//! `seed DIR` creates `DIR/TARGET/seed-NNNN` for each target (existing files are replaced).

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        anyhow::bail!(
            "usage: seed DIR\n\nWrites DIR/TARGET/seed-NNNN for the targets {:?}, from \
             vectors/evidence.json and vectors/op_hash.json.",
            countersign_fuzz::TARGETS
        );
    };
    for target in countersign_fuzz::TARGETS {
        let out = std::path::Path::new(&dir).join(target);
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let seeds = countersign_fuzz::seeds::seeds(target);
        for (i, seed) in seeds.iter().enumerate() {
            let path = out.join(format!("seed-{i:04}"));
            std::fs::write(&path, seed).with_context(|| format!("writing {}", path.display()))?;
        }
        println!("{target}: {} seeds", seeds.len());
    }
    Ok(())
}
