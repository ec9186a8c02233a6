//! ZooKeeper's compressed snapshots (`zookeeper.snapshot.compression.method`
//! = `gz` or `snappy`; `SnapStream` in ZooKeeper): the file is the
//! snapshot's bytes through `GZIPInputStream`'s format or snappy-java's
//! `SnappyOutputStream` framing, and the Adler-32 seals inside cover the
//! uncompressed bytes, so a decompressed snapshot is read like any other.
//!
//! The input is untrusted: a small file may claim to expand to anything,
//! so the output is bounded by [`max_expanded`] of the file's size and
//! refused past it, by name.

use std::io::Read;

/// The most a compressed snapshot of `compressed` bytes may expand to: 64
/// times its size plus 64 MiB. Snapshots compress a few times over (paths,
/// stats and data are varied); only a crafted file comes near this.
pub fn max_expanded(compressed: usize) -> usize {
    compressed.saturating_mul(64).saturating_add(64 << 20)
}

/// The uncompressed bytes of a snapshot named `snapshot.<zxid>.<suffix>`.
pub fn decompress(suffix: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let limit = max_expanded(bytes.len());
    match suffix {
        "gz" => gunzip(bytes, limit),
        "snappy" => unsnappy(bytes, limit),
        other => Err(format!(
            "unknown compression .{other} (ZooKeeper writes .gz and .snappy)"
        )),
    }
}

fn too_big(limit: usize) -> String {
    format!("expands past {limit} bytes (64 times the file plus 64 MiB); refused as a decompression bomb")
}

fn gunzip(bytes: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    // Java's GZIPInputStream reads concatenated members as one stream.
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("not a valid gzip stream: {e}"))?;
    if out.len() > limit {
        return Err(too_big(limit));
    }
    Ok(out)
}

/// snappy-java's stream header: a magic, then its version and the oldest
/// version that can read it (big-endian ints).
const SNAPPY_JAVA_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const SNAPPY_JAVA_HEADER: usize = 16;

/// snappy-java's `SnappyOutputStream` framing: the header, then blocks of
/// a big-endian length and that many bytes of raw snappy. A header may
/// appear again between blocks (concatenated streams, which
/// `SnappyInputStream` accepts).
fn unsnappy(mut bytes: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    if !bytes.starts_with(SNAPPY_JAVA_MAGIC) {
        return Err("not a snappy-java stream (no SNAPPY header)".into());
    }
    let mut out = Vec::new();
    let mut decoder = snap::raw::Decoder::new();
    while !bytes.is_empty() {
        if bytes.starts_with(SNAPPY_JAVA_MAGIC) {
            if bytes.len() < SNAPPY_JAVA_HEADER {
                return Err("snappy header cut short".into());
            }
            bytes = &bytes[SNAPPY_JAVA_HEADER..];
            continue;
        }
        let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
            return Err(format!(
                "{} trailing bytes after the last snappy block",
                bytes.len()
            ));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > rest.len() {
            return Err(format!(
                "a snappy block of {len} bytes with {} left in the file",
                rest.len()
            ));
        }
        let (block, tail) = rest.split_at(len);
        let n = snap::raw::decompress_len(block).map_err(|e| format!("bad snappy block: {e}"))?;
        if out.len().saturating_add(n) > limit {
            return Err(too_big(limit));
        }
        let start = out.len();
        out.resize(start + n, 0);
        decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| format!("bad snappy block: {e}"))?;
        bytes = tail;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn snappy_java(chunks: &[&[u8]]) -> Vec<u8> {
        let mut f = SNAPPY_JAVA_MAGIC.to_vec();
        f.extend_from_slice(&1u32.to_be_bytes());
        f.extend_from_slice(&1u32.to_be_bytes());
        for c in chunks {
            let z = snap::raw::Encoder::new().compress_vec(c).unwrap();
            f.extend_from_slice(&(z.len() as u32).to_be_bytes());
            f.extend_from_slice(&z);
        }
        f
    }

    // ZooKeeper Administrator's Guide, snapshot.compression.method: gz
    // and snappy snapshots hold the same bytes as an uncompressed one.
    #[test]
    fn gzip_and_snappy_java_streams_give_back_their_bytes() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data).unwrap();
        assert_eq!(decompress("gz", &gz.finish().unwrap()).unwrap(), data);
        let (a, b) = data.split_at(30_000);
        assert_eq!(decompress("snappy", &snappy_java(&[a, b])).unwrap(), data);
        // Two streams one after the other, as SnappyInputStream reads them.
        let mut two = snappy_java(&[a]);
        two.extend_from_slice(&snappy_java(&[b]));
        assert_eq!(decompress("snappy", &two).unwrap(), data);
    }

    #[test]
    fn damaged_or_unknown_compressed_snapshots_are_refused_by_name() {
        let data = vec![7u8; 1000];
        let f = snappy_java(&[&data]);
        for cut in [3, 17, 19, f.len() - 1] {
            assert!(decompress("snappy", &f[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decompress("snappy", b"plain bytes")
            .unwrap_err()
            .contains("snappy-java"));
        assert!(decompress("gz", b"plain bytes")
            .unwrap_err()
            .contains("gzip"));
        assert!(decompress("lz4", b"x").unwrap_err().contains(".lz4"));
    }

    // Nothing a file sends may grow memory without bound: a stream that
    // expands past the bound is refused there (the bound is tested small
    // here; `decompress` gives 64x the file plus 64 MiB).
    #[test]
    fn a_decompression_bomb_is_refused_at_the_bound() {
        let zeros = vec![0u8; 1 << 20];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&zeros).unwrap();
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 4096, "{}", bomb.len());
        assert_eq!(gunzip(&bomb, 1 << 20).unwrap().len(), 1 << 20);
        assert!(gunzip(&bomb, (1 << 20) - 1)
            .unwrap_err()
            .contains("decompression bomb"));
        let f = snappy_java(&[&zeros]);
        assert_eq!(unsnappy(&f, 1 << 20).unwrap().len(), 1 << 20);
        assert!(unsnappy(&f, (1 << 20) - 1)
            .unwrap_err()
            .contains("decompression bomb"));
        // A snappy block that claims 2 GiB in five bytes is refused before
        // anything is allocated.
        let mut claim = SNAPPY_JAVA_MAGIC.to_vec();
        claim.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5]);
        claim.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        let e = decompress("snappy", &claim).unwrap_err();
        assert!(e.contains("decompression bomb"), "{e}");
        assert_eq!(max_expanded(1000), 64_000 + (64 << 20));
    }
}
