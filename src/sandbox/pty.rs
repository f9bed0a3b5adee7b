//! Pseudo-terminal pairs for interactive commands (`bash_session`), opened with nix's pty
//! module. Both sides are close-on-exec from the start (`openpty(3)` opens the master without
//! it), so a command spawned concurrently never inherits another session's terminal; the
//! command gets the slave as its stdio through `SpawnSpec::terminal`.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use nix::fcntl::OFlag;
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt};

/// A fresh terminal: the master (non-blocking, for the async reader and writer) and the slave.
pub struct Pty {
    pub master: File,
    pub slave: OwnedFd,
}

/// Opens a terminal of `rows` × `cols` with the default line discipline (canonical input,
/// echo, `^C` → SIGINT to the foreground process group, LF → CRLF on output).
pub fn open(rows: u16, cols: u16) -> std::io::Result<Pty> {
    let master = posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname_r(&master)?;
    // std opens with O_CLOEXEC; O_NOCTTY keeps it from becoming *our* controlling terminal.
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&name)?;
    let master = File::from(OwnedFd::from(master));
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: a valid winsize for the call's duration, on our own descriptor.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = master.as_raw_fd();
    // SAFETY: plain fcntl on our own descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Pty {
        master,
        slave: OwnedFd::from(slave),
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    #[test]
    fn a_pair_echoes_what_the_slave_writes() {
        let p = super::open(24, 80).expect("open a pty");
        let mut slave = std::fs::File::from(p.slave);
        slave.write_all(b"hi\n").expect("write");
        let mut buf = [0u8; 16];
        let mut got = Vec::new();
        for _ in 0..100 {
            match (&p.master).read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
            if got.ends_with(b"\r\n") {
                break;
            }
        }
        // The line discipline turns LF into CRLF on output.
        assert_eq!(got, b"hi\r\n");
    }
}
