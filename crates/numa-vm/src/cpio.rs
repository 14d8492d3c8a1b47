//! A writer for the `newc` cpio format the kernel unpacks as its initramfs.
//!
//! Writing the archive ourselves (instead of running `cpio`) lets the harness create device nodes such as
//! `/dev/console` without root privileges: in the archive they are only a header.

use std::io::{self, Write};

/// Builds an archive in memory, entry by entry.
pub struct Archive {
    bytes: Vec<u8>,
    next_inode: u32,
}

const MODE_DIRECTORY: u32 = 0o040_000;
const MODE_FILE: u32 = 0o100_000;
const MODE_CHAR_DEVICE: u32 = 0o020_000;

impl Archive {
    pub fn new() -> Self {
        Self { bytes: Vec::new(), next_inode: 1 }
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        let name = name.trim_start_matches('/');
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.next_inode,
            mode,
            0, // uid
            0, // gid
            if mode & MODE_DIRECTORY != 0 { 2 } else { 1 },
            0, // mtime
            data.len(),
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() + 1,
            0, // check
        );
        self.next_inode += 1;
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    /// A directory (parents must have been added first).
    pub fn directory(&mut self, name: &str) {
        self.entry(name, MODE_DIRECTORY | 0o755, &[], (0, 0));
    }

    /// A regular file with the given permission bits.
    pub fn file(&mut self, name: &str, permissions: u32, data: &[u8]) {
        self.entry(name, MODE_FILE | permissions, data, (0, 0));
    }

    /// A character device node.
    pub fn char_device(&mut self, name: &str, permissions: u32, major: u32, minor: u32) {
        self.entry(name, MODE_CHAR_DEVICE | permissions, &[], (major, minor));
    }

    /// Finishes the archive and writes it out.
    pub fn write_to(mut self, out: &mut impl Write) -> io::Result<()> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        out.write_all(&self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_four_byte_aligned_newc() {
        let mut archive = Archive::new();
        archive.directory("tests");
        archive.file("tests/a", 0o644, b"hello");
        archive.char_device("dev/console", 0o600, 5, 1);
        let mut bytes = Vec::new();
        archive.write_to(&mut bytes).unwrap();
        assert!(bytes.starts_with(b"070701"));
        assert_eq!(bytes.len() % 4, 0);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("tests/a\0"));
        assert!(text.contains("hello"));
        assert!(text.ends_with("TRAILER!!!\0\0\0\0") || text.contains("TRAILER!!!\0"));
        // Second header: inode 2, mode 0o100644, filesize 5, namesize 8.
        let second = text.find("07070100000002").unwrap();
        assert_eq!(&text[second + 14..second + 22], "000081a4");
        assert_eq!(&text[second + 54..second + 62], "00000005");
        assert_eq!(&text[second + 94..second + 102], "00000008");
    }
}
