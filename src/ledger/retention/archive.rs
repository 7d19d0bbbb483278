//! The archive a prune writes before it deletes (manual: Retention and the archive): JSON lines, one operation a line, or
//! with a name ending in `.zst` the same lines in zstd frames, one frame a batch. Each append is
//! synced before the batch is deleted, so a prune killed at any moment leaves at worst a tail
//! of a batch still stored: [`Archive::open`] cuts that tail before the rerun appends the batch
//! again whole. An operation may be archived twice, never zero times.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// zstd's frame magic number, as the file holds it.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// The compression level of each batch's frame: zstd's default, fast and a tenfold smaller
/// archive of JSON lines.
const LEVEL: i32 = 3;

pub(super) struct Archive {
    file: File,
    zstd: bool,
}

impl Archive {
    /// Opens `path` to append, created if need be, its torn tail cut: a half line of ours, or a
    /// half frame. Another file's text (no trailing newline) stays, and the lines start on a
    /// line of their own; a `.zst` file that is not zstd is refused, untouched.
    pub(super) fn open(path: &Path) -> Result<Archive> {
        let fail = |e: std::io::Error| {
            Error::Invalid(format!("{}: cannot open the archive: {e}", path.display()))
        };
        // readable by its owner only, as the database file and the log are
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(fail)?;
        let zstd = path.extension().is_some_and(|e| e == "zst");
        let len = file.metadata().map_err(fail)?.len();
        let whole = match zstd {
            true => whole_frames(&file, len).map_err(fail)?.ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: not a zstd archive: name a new file, or one a prune wrote",
                    path.display()
                ))
            })?,
            false => whole_lines(&file, len).map_err(fail)?,
        };
        if whole < len {
            let mut head = [0u8; 8];
            let n = file.read_at(&mut head, whole).map_err(fail)?;
            match zstd || head[..n].starts_with(b"{\"key\":") {
                true => file.set_len(whole).map_err(fail)?,
                false => (&file).write_all(b"\n").map_err(fail)?,
            }
        }
        Ok(Archive { file, zstd })
    }

    /// Appends whole lines (a batch) and syncs them to the disk.
    pub(super) fn append(&mut self, lines: &[u8]) -> Result<()> {
        let fail =
            |e: std::io::Error| Error::Unavailable(format!("the archive cannot be written: {e}"));
        if lines.is_empty() {
            return Ok(());
        }
        match self.zstd {
            true => {
                let frame = zstd::bulk::compress(lines, LEVEL).map_err(fail)?;
                self.file.write_all(&frame).map_err(fail)?;
            }
            false => self.file.write_all(lines).map_err(fail)?,
        }
        self.file.sync_data().map_err(fail)
    }
}

/// Where the file's last whole line ends (0 for none), reading back from its end.
fn whole_lines(file: &File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let part = &mut chunk[..(end - start) as usize];
        file.read_exact_at(part, start)?;
        if let Some(at) = part.iter().rposition(|b| *b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Where the file's last whole zstd frame ends, walking the frames' headers and block headers
/// from the start (RFC 8878; nothing is decompressed); `None` when it does not begin as zstd.
fn whole_frames(file: &File, len: u64) -> std::io::Result<Option<u64>> {
    let mut at = 0;
    while at < len {
        match frame_end(file, at, len)? {
            Frame::Whole(end) => at = end,
            // what a kill left of the last batch's frame
            Frame::Torn => return Ok(Some(at)),
            Frame::NotZstd => return Ok(None),
        }
    }
    Ok(Some(at))
}

enum Frame {
    Whole(u64),
    Torn,
    NotZstd,
}

/// The frame that starts at `at`: where it ends, or torn (begun, not all there).
fn frame_end(file: &File, at: u64, len: u64) -> std::io::Result<Frame> {
    let frame = |end: Option<u64>| match end {
        Some(end) if end <= len => Frame::Whole(end),
        _ => Frame::Torn,
    };
    let byte = |pos: u64| -> std::io::Result<Option<u8>> {
        if pos >= len {
            return Ok(None);
        }
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, pos)?;
        Ok(Some(b[0]))
    };
    let mut magic = [0u8; 4];
    let have = (len - at).min(4) as usize;
    file.read_exact_at(&mut magic[..have], at)?;
    if magic[..have] != ZSTD_MAGIC[..have] {
        return Ok(Frame::NotZstd);
    }
    if have < 4 {
        return Ok(Frame::Torn);
    }
    let Some(descriptor) = byte(at + 4)? else {
        return Ok(Frame::Torn);
    };
    let single_segment = descriptor & 0x20 != 0;
    let checksum = descriptor & 0x04 != 0;
    let dictionary = [0, 1, 2, 4][(descriptor & 0x03) as usize];
    let content_size = match descriptor >> 6 {
        0 => u64::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut pos = at + 5 + u64::from(!single_segment) + dictionary + content_size;
    loop {
        let mut header = [0u8; 3];
        if pos + 3 > len {
            return Ok(Frame::Torn);
        }
        file.read_exact_at(&mut header, pos)?;
        let h = u32::from(header[0]) | u32::from(header[1]) << 8 | u32::from(header[2]) << 16;
        let last = h & 1 != 0;
        let size = match (h >> 1) & 0x03 {
            1 => 1, // RLE: one byte repeated
            // reserved: not a frame zstd writes
            3 => return Ok(Frame::NotZstd),
            _ => u64::from(h >> 3),
        };
        pos += 3 + size;
        if last {
            break;
        }
    }
    pos += if checksum { 4 } else { 0 };
    Ok(frame(Some(pos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three batches as three frames; the file cut at every byte of the last: the first two
    /// stand, the torn third goes, and what is left decodes to the first two batches' lines.
    #[test]
    fn a_torn_last_frame_is_cut_and_the_rest_stands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl.zst");
        let batches: Vec<String> = (0..3)
            .map(|b| {
                (0..200)
                    .map(|i| format!("{{\"key\":\"k-{b}-{i}\",\"state\":\"succeeded\"}}\n"))
                    .collect()
            })
            .collect();
        let mut a = Archive::open(&path).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "the owner's only");
        for b in &batches {
            a.append(b.as_bytes()).unwrap();
        }
        drop(a);
        let whole = std::fs::read(&path).unwrap();
        let two = whole.len()
            - zstd::bulk::compress(batches[2].as_bytes(), LEVEL)
                .unwrap()
                .len();
        for cut in two..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            drop(Archive::open(&path).unwrap());
            let left = std::fs::read(&path).unwrap();
            assert_eq!(left.len(), two, "cut at {cut}");
        }
        let text = zstd::stream::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            batches[0].clone() + &batches[1]
        );
        // a whole archive is left as it is, and appended to
        std::fs::write(&path, &whole).unwrap();
        Archive::open(&path)
            .unwrap()
            .append(b"{\"key\":\"z\"}\n")
            .unwrap();
        let text = zstd::stream::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
        assert!(
            String::from_utf8(text)
                .unwrap()
                .ends_with("{\"key\":\"z\"}\n")
        );
    }

    #[test]
    fn a_zst_name_on_another_file_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.zst");
        std::fs::write(&path, "my notes").unwrap();
        let err = Archive::open(&path).err().expect("refused").to_string();
        assert!(err.contains("not a zstd archive"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "my notes");
    }
}
