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
use strict;

my ($listen_fd, $prctl) = @ARGV;
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
    my ($argv, $env) = request($conn) or return;
    send_frame($conn, 'P', $$) or return;
    my $go = read_exact($conn, 1);
    return unless defined $go && $go eq 'G';
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
    my $argc = shift @parts;
    return unless defined $argc && $argc =~ /^[1-9][0-9]*$/ && $argc < @parts;
    my @argv = splice(@parts, 0, $argc);
    my $envc = shift @parts;
    return unless defined $envc && $envc =~ /^[0-9]+$/ && $envc <= @parts;
    my %env = map { split /=/, $_, 2 } grep { /=/ } splice(@parts, 0, $envc);
    return (\@argv, \%env);
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
