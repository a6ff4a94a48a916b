//! A small tmpfs mounted for a test, so a test can fill a disk for real (ENOSPC from the
//! kernel, not a simulated error). Mounting needs root: where the tests do not run as
//! root, [`Tmpfs::mount`] says so and returns `None`, and the test does nothing.

use std::path::Path;
use std::process::Command;

/// A tmpfs of a given size mounted on a fresh directory; unmounted (lazily, so a process
/// still holding a file in it cannot keep it mounted) when dropped.
#[derive(Debug)]
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, such as `16m`), or returns `None`
    /// when not running as root. Panics if mounting as root fails: the test must not
    /// pass without having filled a disk.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root, cannot mount a tmpfs; skipped");
            return None;
        }
        let dir = tempfile::Builder::new().prefix("strata-full-").tempdir().expect("mount point");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(st.success(), "mounting a tmpfs as root failed: {st}");
        Some(Tmpfs { dir })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes free on the file system (`statvfs`), for messages and assertions.
    pub fn free_bytes(&self) -> u64 {
        use std::os::unix::ffi::OsStrExt;
        let Ok(path) = std::ffi::CString::new(self.path().as_os_str().as_bytes()) else { return 0 };
        // SAFETY: statvfs is plain old data; zeroed is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is a valid C string and `st` a struct we own.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return 0;
        }
        st.f_bavail as u64 * st.f_frsize as u64
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}
