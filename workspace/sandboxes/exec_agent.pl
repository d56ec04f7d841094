# The exec agent: the process that holds an open sandbox's namespaces (bubblewrap's command),
# and starts each exec's command inside them, so an exec costs a fork here instead of a chain of
# host programs entering the namespaces (see exec_agent.py).
#
# Perl because Debian's perl-base is Essential (always under /usr, which the sandbox sees) and
# starts in about 2 ms with no modules; the agent is a few MB of the sandbox's own memory.
# It runs as the sandbox's uid with no_new_privs, like the commands: it holds nothing they lack.
#
# Protocol, one connection per command, on the listening socket the server passes as fd ARGV[0]:
#   server -> agent: 4-byte big-endian length, then "argc\0arg...\0envc\0KEY=value\0..."
#   agent -> server: frames of 1 type byte, 4-byte big-endian length, data:
#     P  the process-group id of this command (its session process, in the sandbox's pids)
#   server -> agent: one byte "G" once the server holds a pidfd of that session; only then is the
#     command started (a command that killed its session at once would otherwise leave the
#     server nothing to kill its group through: its time limit would not hold)
#     O  stdout bytes            E  stderr bytes
#     X  the command's wait status (decimal), once it ended; the connection closes when its
#        output pipes do. The server owns time limits and kills from the host.
#
# Terminals (protocol 3). A request whose body starts "pty\0TID\0ROWS\0COLS\0IDLE\0SECRET\0" before the argv
# opens a terminal: its session, the keeper, holds a PTY whose other end is the command's
# controlling terminal (a session of its own), keeps the last 256 KiB of its output, and outlives
# its connection until it is closed or the sandbox is. A request "att\0TID\0SINCE\0SECRET" attaches to a
# keeper (through the abstract socket "\0ws-term-TID", this sandbox's network namespace alone):
# the keeper replays its output from offset SINCE, then goes on live. An optional "\0GENERATION"
# after SECRET (microseconds of the server machine's monotonic clock when it made the attach)
# orders attaches: one older than the newest the keeper took is refused, never takes over. Keeper -> server frames:
#     A  "FROM END": what follows replays bytes FROM..END of the output (FROM > SINCE: the rest is gone)
#     O  output bytes            Y  "END": the replay is done, what follows is live
#     X  the command's wait status, once it ended (again to every later attach)
#     T  another attach took the terminal over: this connection ends
#     B  "1" once the terminal runs a command (one other than the shell holds its foreground, or
#        a job of the shell runs in the background), "0" once it runs none (said to each attach,
#        and again every BUSY_REPEAT seconds while busy)
#   server -> keeper frames: I input bytes, W rows and cols (two 16-bit numbers), K a signal
#     number for the foreground process group (HUP INT QUIT TERM TSTP), Z "T" or "S" stop every
#     command the terminal runs (a command that may not run now: its foreground SIGTSTP or SIGSTOP,
#     its background jobs SIGSTOP), C close the terminal (its session is hung up).
# A new attach replaces the one before; a terminal without one keeps reading, dropping its oldest,
# and closes itself once it has had none for IDLE seconds (0: never).
use strict;

my ($listen_fd, $prctl, $setsid, $ioctls) = @ARGV;
my ($TIOCGPTN, $TIOCSPTLCK, $TIOCSCTTY, $TIOCSWINSZ, $TIOCSIG, $TIOCGPGRP) = split /,/, ($ioctls // '');
my $RING_BYTES = 256 * 1024;
# What a viewer that does not take its output may have waiting before it is let go (it reattaches
# and is replayed what the ring still holds): the keeper itself never waits on a viewer. (Declared
# up here: the agent's loop below never ends, so nothing declared after it is ever set.)
my $VIEWER_BACKLOG = 1024 * 1024;
# Past this much output waiting for its viewer the keeper stops reading the terminal, so that the
# command's writes block as on any terminal whose reader is slow: an attached viewer misses
# nothing, and the program slows to its pace. Nobody attached: it reads on, keeping the last RING_BYTES.
my $VIEWER_PAUSE = 64 * 1024;
# A viewer that took nothing of it for this many seconds is let go all the same (the server's relay
# gives up on its own slow client before this): a stuck viewer does not hold the command.
my $VIEWER_STALL = 20;
# Attaches waiting to say their first frame at once, at most (the oldest is let go for a newer one).
my $PENDING_MAX = 8;
# How often a viewer is told again that a command runs (B): the server renews its slot then.
my $BUSY_REPEAT = 300;
open(my $listen, '+<&=', $listen_fd) or die "exec agent: no listening socket on fd $listen_fd: $!\n";
# Not dumpable (prctl PR_SET_DUMPABLE 0, by the syscall number the server passes for this machine):
# the sandbox's commands, same uid, cannot ptrace the agent or its sessions, read their memory or
# take their descriptors. Each command's exec makes it dumpable again, so commands can still debug
# each other.
syscall($prctl, 4, 0, 0, 0, 0) if $prctl;
$SIG{CHLD} = 'IGNORE';    # sessions are reaped by the kernel
$| = 1;
print "ready\n";
# The server reads the ready line and closes the pipe; nothing more is said on it.
open(STDOUT, '>', '/dev/null');
open(STDERR, '>', '/dev/null');
open(STDIN, '<', '/dev/null');

while (1) {
    my $conn;
    if (!accept($conn, $listen)) {
        select(undef, undef, undef, 0.01);    # out of descriptors: do not spin
        next;
    }
    my $pid = fork;
    if (!defined $pid) {
        # At the sandbox's process limit: say so rather than hang up without a word.
        failed($conn, "cannot start the command: $!");
    } elsif ($pid == 0) {
        close $listen;
        session($conn);
        exit 0;
    }
    close $conn;
}

sub session {
    my ($conn) = @_;
    $SIG{CHLD} = 'DEFAULT';
    setpgrp(0, 0);
    my ($argv, $env, $terminal) = request($conn) or return;
    return attach($conn, $terminal) if $terminal && $terminal->{attach};
    send_frame($conn, 'P', $$) or return;
    my $go = read_exact($conn, 1);
    return unless defined $go && $go eq 'G';
    return keeper($conn, $argv, $env, $terminal) if $terminal;
    pipe(my $out_r, my $out_w) or return failed($conn, "pipe: $!");
    pipe(my $err_r, my $err_w) or return failed($conn, "pipe: $!");
    my $child = fork;
    return failed($conn, "cannot start the command: $!") unless defined $child;
    if ($child == 0) {
        close $conn;
        close $out_r;
        close $err_r;
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>&', $out_w);
        open(STDERR, '>&', $err_w);
        close $out_w;
        close $err_w;
        chdir '/workspace';
        %ENV = %$env;
        $SIG{CHLD} = 'DEFAULT';
        $SIG{PIPE} = 'DEFAULT';
        exec { $argv->[0] } @$argv;
        print STDERR "$argv->[0]: $!\n";
        exit($! == 2 ? 127 : 126);
    }
    close $out_w;
    close $err_w;
    relay($conn, $child, {fileno($out_r) => ['O', $out_r], fileno($err_r) => ['E', $err_r]});
}

# Output as it comes until both pipes close; the wait status as soon as the command ends, even
# while a background child it left keeps the pipes open (the server then waits a short grace).
sub relay {
    my ($conn, $child, $open) = @_;
    my $status;
    while (%$open) {
        my $wanted = '';
        vec($wanted, $_, 1) = 1 for keys %$open;
        vec($wanted, fileno($conn), 1) = 1;
        my $ready = select(my $got = $wanted, undef, undef, defined $status ? undef : 0.05);
        if (!defined $status && waitpid($child, 1) == $child) {
            $status = $?;
            send_frame($conn, 'X', $status) or return;
        }
        next if $ready <= 0;
        # Anything from the server, or its end, means it no longer reads: stop relaying.
        return if vec($got, fileno($conn), 1);
        for my $fd (keys %$open) {
            next unless vec($got, $fd, 1);
            my ($type, $pipe) = @{$open->{$fd}};
            my $read = sysread($pipe, my $chunk, 65536);
            if (!$read) {
                delete $open->{$fd};
                next;
            }
            send_frame($conn, $type, $chunk) or return;
        }
    }
    if (!defined $status) {
        waitpid($child, 0);
        send_frame($conn, 'X', $?);
    }
}

sub request {
    my ($conn) = @_;
    my $head = read_exact($conn, 4);
    return unless defined $head;
    my $length = unpack('N', $head);
    return if $length > 4 * 1024 * 1024;
    my $body = read_exact($conn, $length);
    return unless defined $body;
    my @parts = split /\0/, $body, -1;
    my $terminal;
    if (@parts && $parts[0] eq 'att') {
        my (undef, $id, $since, $secret, $generation) = @parts;
        return unless defined $secret && $id =~ /^[A-Za-z0-9_-]{1,64}$/ && $since =~ /^[0-9]{1,18}$/;
        return unless $secret =~ /^[A-Za-z0-9_-]{16,128}$/;
        $generation //= '';
        return unless $generation =~ /^[0-9]{0,15}$/;
        return (undef, undef, {attach => 1, id => $id, since => $since, secret => $secret, generation => $generation});
    }
    if (@parts && $parts[0] eq 'pty') {
        my (undef, $id, $rows, $cols, $idle, $secret) = splice(@parts, 0, 6);
        return unless defined $secret && $id =~ /^[A-Za-z0-9_-]{1,64}$/ && $secret =~ /^[A-Za-z0-9_-]{16,128}$/;
        return unless $rows =~ /^[1-9][0-9]{0,3}$/ && $cols =~ /^[1-9][0-9]{0,3}$/ && $idle =~ /^[0-9]{1,9}$/;
        $terminal = {id => $id, rows => $rows, cols => $cols, idle => $idle, secret => $secret};
    }
    my $argc = shift @parts;
    return unless defined $argc && $argc =~ /^[1-9][0-9]*$/ && $argc < @parts;
    my @argv = splice(@parts, 0, $argc);
    my $envc = shift @parts;
    return unless defined $envc && $envc =~ /^[0-9]+$/ && $envc <= @parts;
    my %env = map { split /=/, $_, 2 } grep { /=/ } splice(@parts, 0, $envc);
    return (\@argv, \%env, $terminal);
}

sub read_exact {
    my ($conn, $wanted) = @_;
    my $data = '';
    while (length($data) < $wanted) {
        my $read = sysread($conn, $data, $wanted - length($data), length($data));
        return undef unless $read;
    }
    return $data;
}

sub send_frame {
    my ($conn, $type, $data) = @_;
    my $frame = $type . pack('N', length($data)) . $data;
    while (length $frame) {
        my $written = syswrite($conn, $frame);
        return 0 unless $written;
        substr($frame, 0, $written, '');
    }
    return 1;
}

sub failed {
    my ($conn, $why) = @_;
    send_frame($conn, 'E', "$why\n") and send_frame($conn, 'X', 126 << 8);
    return;
}

# -- terminals ---------------------------------------------------------------------------------

sub keeper {
    my ($conn, $argv, $env, $terminal) = @_;
    return failed($conn, "terminals are not known on this machine") unless $TIOCGPTN && $setsid;
    socket(my $listener, 1, 1, 0) or return failed($conn, "socket: $!");    # AF_UNIX, SOCK_STREAM
    # An abstract name: in this sandbox's network namespace alone, gone with the keeper. Code in the
    # sandbox can connect too; only the server knows the terminal's secret, which an attach says.
    bind($listener, pack('S', 1) . "\0ws-term-$terminal->{id}") or return failed($conn, "the terminal exists");
    listen($listener, 4) or return failed($conn, "listen: $!");
    # O_RDWR|O_NOCTTY (2|0400, the generic numbers): sysopen takes numbers, no Fcntl needed.
    sysopen(my $master, '/dev/ptmx', 2 | 0400) or return failed($conn, "/dev/ptmx: $!");
    my $unlock = pack('i', 0);
    ioctl($master, $TIOCSPTLCK, $unlock) or return failed($conn, "unlockpt: $!");
    my $number = pack('I', 0);
    ioctl($master, $TIOCGPTN, $number) or return failed($conn, "ptsname: $!");
    $number = unpack('I', $number);
    my $winsize = pack('S4', $terminal->{rows}, $terminal->{cols}, 0, 0);
    ioctl($master, $TIOCSWINSZ, $winsize) or return failed($conn, "winsize: $!");
    my $child = fork;
    return failed($conn, "cannot start the terminal: $!") unless defined $child;
    if ($child == 0) {
        close $conn;
        close $master;
        close $listener;
        syscall($setsid) >= 0 or exit 126;    # a session of its own, the terminal its controlling one
        sysopen(my $slave, "/dev/pts/$number", 2) or exit 126;
        ioctl($slave, $TIOCSCTTY, 0) or exit 126;
        open(STDIN, '<&', $slave);
        open(STDOUT, '>&', $slave);
        open(STDERR, '>&', $slave);
        close $slave;
        chdir '/workspace';
        %ENV = %$env;
        $SIG{$_} = 'DEFAULT' for qw(CHLD PIPE INT QUIT TSTP TTIN TTOU HUP);
        exec { $argv->[0] } @$argv;
        print STDERR "$argv->[0]: $!\n";
        exit($! == 2 ? 127 : 126);
    }
    $SIG{PIPE} = 'IGNORE';
    # The command's end interrupts the keeper's wait (select), so that it need not poll for it.
    $SIG{CHLD} = sub { };
    # Nothing the keeper reads or writes may block it: not the command's input, not a viewer.
    fcntl($master, 4, 04000 | 2);    # F_SETFL, O_NONBLOCK | O_RDWR
    my %k = (ring => '', end => 0, status => undef, gone_at => undef, pending => '', in => '', out => '', newest => 0);
    my $viewer = $conn;
    fcntl($viewer, 4, 04000 | 2);
    queue(\%k, 'A', "0 0");
    queue(\%k, 'Y', "0");
    my $master_open = 1;
    my $alone_since = time;
    my @pending;    # [connection, what it said, deadline] of attaches that have not said their frame
    while (1) {
        $k{stalled_since} = undef unless $viewer && length($k{out}) >= $VIEWER_PAUSE;
        $k{stalled_since} //= time if $viewer && length($k{out}) >= $VIEWER_PAUSE;
        if ($viewer && (length($k{out}) > $VIEWER_BACKLOG || time - ($k{stalled_since} // time) > $VIEWER_STALL)) {
            ($viewer, $k{out}, $k{in}) = (undef, '', '');    # too slow: let go; it attaches again
        }
        if ($viewer) {
            $alone_since = time;
        } elsif ($terminal->{idle} && time - $alone_since > $terminal->{idle}) {
            return close_terminal($master_open ? $master : undef, $child, $k{status});    # idle
        }
        if (defined $k{status} && !$master_open && !$k{told}) {
            $k{told} = 1;
            queue(\%k, 'X', $k{status}) if $viewer;
        }
        tell_busy(\%k, $master, $child) if $viewer && $master_open;
        my ($r, $w) = ('', '');
        vec($r, fileno($listener), 1) = 1;
        vec($r, fileno($_->[0]), 1) = 1 for @pending;
        vec($r, fileno($viewer), 1) = 1 if $viewer;
        vec($w, fileno($viewer), 1) = 1 if $viewer && length $k{out};
        vec($r, fileno($master), 1) = 1 if $master_open && !($viewer && length($k{out}) >= $VIEWER_PAUSE);
        vec($w, fileno($master), 1) = 1 if $master_open && length $k{pending};
        # Woken by the descriptors and by the command's end (SIGCHLD); at least every second
        # while the command runs (its foreground, a SIGCHLD that came just before the wait) or
        # nobody is attached (the idle limit).
        my $wait = !$k{told} || ($terminal->{idle} && !$viewer) || $k{stalled_since} || @pending ? 1 : undef;
        my $n = select(my $rr = $r, my $ww = $w, undef, $wait);
        if (!defined $k{status} && waitpid($child, 1) == $child) {
            ($k{status}, $k{gone_at}) = ($?, time);
        }
        # The command ended: what it wrote last is read (EIO once nothing holds the terminal open),
        # then its status; a background job that keeps the terminal open gets 2 s.
        if (defined $k{status} && $master_open && time - $k{gone_at} > 2) {
            $master_open = 0;
            close $master;
        }
        next if $n <= 0;
        if ($viewer && length $k{out} && vec($ww, fileno($viewer), 1)) {
            my $written = syswrite($viewer, $k{out});
            if (defined $written) {
                substr($k{out}, 0, $written, '');
                $k{stalled_since} = undef if $written;    # it takes what it is sent: not stuck
            } elsif ($! + 0 != 11) {    # not EAGAIN: it went away
                ($viewer, $k{out}, $k{in}) = (undef, '', '');
            }
        }
        if ($master_open && vec($rr, fileno($master), 1)) {
            my $read = sysread($master, my $chunk, 65536);
            if (defined $read && $read > 0) {
                $k{ring} .= $chunk;
                $k{end} += $read;
                substr($k{ring}, 0, length($k{ring}) - $RING_BYTES, '') if length($k{ring}) > $RING_BYTES;
                queue(\%k, 'O', $chunk) if $viewer;
            } elsif (!(!defined $read && $! + 0 == 11)) {    # not EAGAIN: EIO, nothing holds it open
                $master_open = 0;
                close $master;
                if (!defined $k{status}) {
                    waitpid($child, 0);
                    ($k{status}, $k{gone_at}) = ($?, time);
                }
            }
        }
        if ($master_open && length $k{pending} && vec($ww, fileno($master), 1)) {
            my $written = syswrite($master, $k{pending});
            substr($k{pending}, 0, $written, '') if $written;
        }
        if (vec($rr, fileno($listener), 1) && accept(my $next, $listener)) {
            # Whoever connects says where to replay from, and the terminal's secret, within two
            # seconds, or is let go; it is never waited for: code in the sandbox may connect too,
            # and must not hold the keeper (the oldest of too many waiting is let go first).
            fcntl($next, 4, 04000 | 2);
            close((shift @pending)->[0]) if @pending >= $PENDING_MAX;
            push @pending, [$next, '', time + 2];
        }
        my @waiting;
        for my $attach (@pending) {
            my ($next, undef, $deadline) = @$attach;
            my $read = vec($rr, fileno($next), 1) ? sysread($next, $attach->[1], 512, length $attach->[1]) : -1;
            my $said = first_frame($attach->[1]);
            if (!defined $said) {
                # Not yet whole: waits on, unless it hung up, said too much, or its time is up.
                if ((defined $read && $read == 0) || length($attach->[1]) > 512 || time > $deadline) {
                    close $next;
                } else {
                    push @waiting, $attach;
                }
                next;
            }
            my ($since, $secret, $generation) = $said->[0] eq 'S' ? split(/ /, $said->[1], 3) : ();
            $generation //= '';
            my $valid = defined $secret && $since =~ /^[0-9]{1,18}$/ && $secret eq $terminal->{secret};
            # An attach the server made before the one now attached never takes it over: its
            # connection lagged (a reload's old page, on a loaded machine) and its client is gone.
            if ($valid && $generation =~ /^[0-9]{1,15}$/ && $generation < $k{newest}) {
                close $next;
            } elsif ($valid && $generation =~ /^[0-9]{0,15}$/) {
                $k{newest} = $generation if length $generation;
                if ($viewer) {
                    syswrite($viewer, 'T' . pack('N', 0));    # taken over: the page before says so
                    close $viewer;
                }
                ($viewer, $k{out}, $k{in}) = ($next, '', $said->[2]);
                replay(\%k, $since);
                $k{busy_said} = undef;    # said again to this viewer
            } else {
                close $next;
            }
        }
        @pending = @waiting;
        # What the viewer sent: read now, or left over from its attach (read with its first frame).
        if ($viewer && (vec($rr, fileno($viewer), 1) || length $k{in})) {
            my $read = vec($rr, fileno($viewer), 1) ? sysread($viewer, $k{in}, 65536, length $k{in}) : -1;
            if (!$read && !(!defined $read && $! + 0 == 11)) {
                close $viewer;    # detached: the terminal goes on, its output kept in the ring
                ($viewer, $k{out}, $k{in}) = (undef, '', '');
                next;
            }
            while (length($k{in}) >= 5) {
                my ($type, $length) = unpack('aN', $k{in});
                if ($length > 65536) {
                    close $viewer;    # no frame of the server's is that long: not the server
                    ($viewer, $k{out}, $k{in}) = (undef, '', '');
                    last;
                }
                last if length($k{in}) < 5 + $length;
                my $data = substr($k{in}, 5, $length);
                substr($k{in}, 0, 5 + $length, '');
                if ($type eq 'I') {
                    # Input the command does not take is held up to 1 MiB; the server stops reading
                    # its client before that.
                    $k{pending} .= $data if $master_open && length($k{pending}) < 1 << 20;
                } elsif ($type eq 'W' && $length == 4 && $master_open) {
                    my $size = pack('S4', unpack('nn', $data), 0, 0);
                    ioctl($master, $TIOCSWINSZ, $size);    # the kernel tells the foreground group (SIGWINCH)
                } elsif ($type eq 'K' && $data =~ /^(?:1|2|3|15|19|20)$/ && $master_open) {
                    # A PTY's TIOCSIG sends INT, QUIT and TSTP alone (as their keys would); the
                    # others go to the foreground process group by kill.
                    if ($data =~ /^(?:2|3|20)$/) {
                        ioctl($master, $TIOCSIG, 0 + $data);
                    } elsif ((my $group = foreground($master)) > 1) {
                        kill(0 + $data, -$group);
                    }
                } elsif ($type eq 'Z' && $data =~ /^[TS]$/ && $master_open) {
                    stop_jobs($master, $child, $data);
                } elsif ($type eq 'C') {
                    return close_terminal($master_open ? $master : undef, $child, $k{status});
                }
            }
        }
    }
}

# B to the viewer when what holds the terminal's foreground changed (or is still a command after
# BUSY_REPEAT seconds): a process group other than the shell's is a command it runs.
sub tell_busy {
    my ($k, $master, $shell) = @_;
    return unless $TIOCGPGRP;
    my $group = foreground($master);
    my $busy = $group > 0 && $group != $shell ? 1 : 0;
    # A job in the background runs too (`cmd &`, `bg`): looked for once a second, not at each read.
    if (!$busy && time != ($k->{jobs_at} // 0)) {
        ($k->{jobs_at}, $k->{jobs}) = (time, scalar(running_jobs($shell)));
    }
    $busy ||= $k->{jobs} ? 1 : 0;
    return if defined $k->{busy_said} && $k->{busy_said} == $busy && !($busy && time - $k->{busy_at} >= $BUSY_REPEAT);
    ($k->{busy_said}, $k->{busy_at}) = ($busy, time);
    queue($k, 'B', $busy);
}

# The process groups of the shell's session, other than the shell's own, with a process that runs
# (not stopped, not a zombie): the commands it runs, in the foreground or not.
sub running_jobs {
    my ($shell) = @_;
    my %groups;
    opendir(my $proc, '/proc') or return ();
    for my $pid (grep { /^[0-9]+$/ } readdir $proc) {
        open(my $stat, '<', "/proc/$pid/stat") or next;
        my $line = <$stat>;
        next unless defined $line && $line =~ /\)\s+(\S)\s+[0-9]+\s+([0-9]+)\s+([0-9]+)/;
        my ($state, $group, $session) = ($1, $2, $3);
        $groups{$group} = 1 if $session == $shell && $group != $shell && $state !~ /[TtZX]/;
    }
    return keys %groups;
}

# Stops what the terminal runs (a command that may not run now): its foreground as Ctrl-Z would
# (SIGTSTP, `how` T) or for certain (SIGSTOP, S), and its other running jobs with SIGSTOP.
sub stop_jobs {
    my ($master, $shell, $how) = @_;
    my $foreground = foreground($master);
    for my $group (running_jobs($shell)) {
        next if $how eq 'T' && $group == $foreground;
        kill('STOP', -$group);
    }
    ioctl($master, $TIOCSIG, 20) if $how eq 'T' && $foreground > 1 && $foreground != $shell;
}

# The terminal's foreground process group (0 when it cannot be told).
sub foreground {
    my ($master) = @_;
    return 0 unless $TIOCGPGRP;
    my $group = pack('i', 0);
    return ioctl($master, $TIOCGPGRP, $group) ? unpack('i', $group) : 0;
}

# A frame for the viewer, sent as it takes it (never waited for).
sub queue {
    my ($k, $type, $data) = @_;
    $k->{out} .= $type . pack('N', length($data)) . $data;
}

# The output from offset `$since` that the ring still holds (A says from where), then Y, and X
# when the command ended.
sub replay {
    my ($k, $since) = @_;
    my $start = $k->{end} - length($k->{ring});
    my $from = $since < $start ? $start : ($since > $k->{end} ? $k->{end} : $since);
    queue($k, 'A', "$from $k->{end}");
    for (my $offset = $from - $start; $offset < length $k->{ring}; $offset += 65536) {
        queue($k, 'O', substr($k->{ring}, $offset, 65536));
    }
    queue($k, 'Y', $k->{end});
    queue($k, 'X', $k->{status}) if $k->{told};
}

# An attach: this session connects to the terminal's keeper and copies bytes both ways.
sub attach {
    my ($conn, $terminal) = @_;
    socket(my $keeper, 1, 1, 0) or return failed($conn, "socket: $!");
    connect($keeper, pack('S', 1) . "\0ws-term-$terminal->{id}") or return send_frame($conn, 'N', "no such terminal");
    my $said = "$terminal->{since} $terminal->{secret}";
    $said .= " $terminal->{generation}" if length $terminal->{generation};
    send_frame($keeper, 'S', $said) or return;
    while (1) {
        my $r = '';
        vec($r, fileno($conn), 1) = 1;
        vec($r, fileno($keeper), 1) = 1;
        select(my $got = $r, undef, undef, undef) > 0 or next;
        for my $pair ([$conn, $keeper], [$keeper, $conn]) {
            my ($from, $to) = @$pair;
            next unless vec($got, fileno($from), 1);
            my $read = sysread($from, my $chunk, 65536);
            return unless $read;
            while (length $chunk) {
                my $written = syswrite($to, $chunk);
                return unless $written;
                substr($chunk, 0, $written, '');
            }
        }
    }
}

# The first frame of `$buffer` (type, data, and the bytes after it: the viewer's first input, sent at
# once, is kept for it), once it is whole; a frame of more than 256 bytes is refused as ['', ''].
sub first_frame {
    my ($buffer) = @_;
    return undef if length($buffer) < 5;
    my ($type, $length) = unpack('aN', $buffer);
    return ['', '', ''] if $length > 256;
    return undef if length($buffer) < 5 + $length;
    return [$type, substr($buffer, 5, $length), substr($buffer, 5 + $length)];
}

# Hung up (the shell hands it on to its jobs), then whatever of its session is left is killed: a
# job that ignores the hang-up does not outlive its terminal.
sub close_terminal {
    my ($master, $child, $status) = @_;
    kill('HUP', -$child) if !defined $status;
    close $master if $master;
    select(undef, undef, undef, 0.2);
    kill_session($child);
    return;
}

# Every process of the session `$sid` (the field after the command's name in /proc/PID/stat).
sub kill_session {
    my ($sid) = @_;
    opendir(my $proc, '/proc') or return;
    for my $pid (grep { /^[0-9]+$/ } readdir $proc) {
        open(my $stat, '<', "/proc/$pid/stat") or next;
        my $line = <$stat>;
        next unless defined $line && $line =~ /\)\s+\S+\s+[0-9]+\s+[0-9]+\s+([0-9]+)/;
        kill('KILL', $pid) if $1 == $sid;
    }
}
