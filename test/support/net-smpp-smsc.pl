#!/usr/bin/perl
# An SMSC that Herald did not write, for interoperability tests: Net::SMPP's server side
# (Debian's libnet-smpp-perl) in its plain loop, one connection at a time.
#
#   net-smpp-smsc.pl PORT RECORD_FILE SYSTEM_ID PASSWORD
#
# Listens on 127.0.0.1:PORT (0: any free port) and prints the port once it listens. Takes a
# transceiver bind with these credentials, answers enquire_link and unbind, answers each
# submit_sm with a message id of its own (upper-case hex) and 50 ms later sends a DELIVRD
# receipt for it (esm_class 0x04, the SMPP 3.4 Appendix B text, no TLVs). Writes one JSON line
# to RECORD_FILE for each bind, submit_sm and deliver_sm_resp it receives.
use strict;
use warnings;
use IO::Select;
use JSON::PP;
use POSIX qw(strftime);
use Time::HiRes qw(time);
use Net::SMPP;

@ARGV == 4 or die "usage: $0 PORT RECORD_FILE SYSTEM_ID PASSWORD\n";
my ($port, $record_path, $system_id, $password) = @ARGV;

use constant {
    RECEIPT_DELAY => 0.05,
    ESME_RINVBNDSTS => 0x04, ESME_RINVCMDID => 0x03, ESME_RBINDFAIL => 0x0D,
    CMD_SUBMIT_SM => 0x04, CMD_UNBIND => 0x06, CMD_BIND_TRANSCEIVER => 0x09, CMD_ENQUIRE_LINK => 0x15,
    CMD_DELIVER_SM_RESP => 0x80000005, RESPONSE => 0x80000000,
};

open my $record, '>>', $record_path or die "cannot open $record_path: $!\n";
$record->autoflush(1);
my $json = JSON::PP->new->canonical;
sub record { print {$record} $json->encode({@_}), "\n" }

my $listener = Net::SMPP->new_listen('127.0.0.1', port => $port, system_id => 'NetSMPP')
    or die "cannot listen on 127.0.0.1:$port: $!\n";
$| = 1;
print $listener->sockport, "\n";

my $next_id = 0xA0000;
while (1) {
    my $connection = $listener->accept or next;    # the listener's 5 s accept timeout
    serve($connection);
    close $connection;
}

# One ESME's connection until it unbinds or goes away.
sub serve {
    my ($smsc) = @_;
    my $select = IO::Select->new($smsc);
    my $bound = 0;
    my @receipts;    # [when due, deliver_sm arguments], in order due
    while (1) {
        my $wait = @receipts ? $receipts[0][0] - time : undef;
        if ($select->can_read(defined $wait && $wait < 0 ? 0 : $wait)) {
            my $pdu = $smsc->read_pdu or return;
            my $cmd = $pdu->{cmd};
            if ($cmd == CMD_BIND_TRANSCEIVER) {
                $bound = $pdu->{system_id} eq $system_id && $pdu->{password} eq $password;
                record(pdu => 'bind_transceiver', system_id => $pdu->{system_id}, interface_version => $pdu->{interface_version}, accepted => $bound ? JSON::PP::true : JSON::PP::false);
                $smsc->bind_transceiver_resp(seq => $pdu->{seq}, status => $bound ? 0 : ESME_RBINDFAIL);
            } elsif ($cmd == CMD_ENQUIRE_LINK) {
                $smsc->enquire_link_resp(seq => $pdu->{seq});
            } elsif ($cmd == CMD_UNBIND) {
                $smsc->unbind_resp(seq => $pdu->{seq});
                return;
            } elsif ($cmd == CMD_SUBMIT_SM && !$bound) {
                $smsc->submit_sm_resp(seq => $pdu->{seq}, message_id => '', status => ESME_RINVBNDSTS);
            } elsif ($cmd == CMD_SUBMIT_SM) {
                my $id = sprintf '%X', $next_id++;
                $smsc->submit_sm_resp(seq => $pdu->{seq}, message_id => $id);
                record(
                    pdu => 'submit_sm', message_id => $id,
                    source_addr => $pdu->{source_addr}, source_addr_ton => $pdu->{source_addr_ton}, source_addr_npi => $pdu->{source_addr_npi},
                    destination_addr => $pdu->{destination_addr}, dest_addr_ton => $pdu->{dest_addr_ton}, dest_addr_npi => $pdu->{dest_addr_npi},
                    esm_class => $pdu->{esm_class}, data_coding => $pdu->{data_coding}, registered_delivery => $pdu->{registered_delivery},
                    short_message => unpack('H*', $pdu->{short_message}),
                );
                push @receipts, [time + RECEIPT_DELAY, receipt($pdu, $id)];
            } elsif ($cmd == CMD_DELIVER_SM_RESP) {
                record(pdu => 'deliver_sm_resp', status => $pdu->{status});
            } elsif (!($cmd & RESPONSE)) {
                $smsc->generic_nack(seq => $pdu->{seq}, status => ESME_RINVCMDID);
            }
        }
        while (@receipts && $receipts[0][0] <= time) {
            $smsc->deliver_sm(@{ (shift @receipts)->[1] }, async => 1);
        }
    }
}

# The deliver_sm reporting submit_sm $submit, answered with $id, delivered: from the recipient
# back to the sender, its text the message's first 20 octets after any user data header.
sub receipt {
    my ($submit, $id) = @_;
    my $text = $submit->{short_message};
    $text = substr $text, 1 + ord $text if $submit->{esm_class} & 0x40;
    my $date = strftime '%y%m%d%H%M', localtime;
    return [
        source_addr_ton => $submit->{dest_addr_ton}, source_addr_npi => $submit->{dest_addr_npi}, source_addr => $submit->{destination_addr},
        dest_addr_ton => $submit->{source_addr_ton}, dest_addr_npi => $submit->{source_addr_npi}, destination_addr => $submit->{source_addr},
        esm_class => 0x04, data_coding => 0,
        short_message => sprintf('id:%s sub:001 dlvrd:001 submit date:%s done date:%s stat:DELIVRD err:000 text:%.20s', $id, $date, $date, $text),
    ];
}
