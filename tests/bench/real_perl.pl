#!/usr/bin/perl
# real_perl — a real program under the preload: perl (built with the system
# malloc, usemymalloc='n') building, sorting, grouping and serialising a
# large list of records made of small hashes and strings. Every string, hash
# table and array buffer perl allocates goes through malloc/realloc/free.
#
# Deterministic: a fixed LCG makes the data, output is sorted, and run.sh sets
# PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 so even the allocation order repeats.
# Prints one line, "checksum=<hex>". Argument: number of records.
use strict;
use warnings;

my $n = @ARGV ? $ARGV[0] : 50000;

if (my $pre = $ENV{LD_PRELOAD}) {	# prove the preload took effect
	(my $base = $pre) =~ s{.*/}{};
	open(my $maps, '<', '/proc/self/maps') or die "maps: $!";
	my $found = grep { index($_, $base) >= 0 } <$maps>;
	unless ($found) { print STDERR "real_perl: $pre not mapped\n"; exit 4 }
}

my $seed = 12345;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed >> 4; }
my @syll = qw(ka lo mi nu pe ra si to vu xe za bo cy de fu);
sub word {
	my $len = 1 + rnd() % 5;
	return join('', map { $syll[rnd() % @syll] } 1 .. $len);
}

my @recs;
for my $i (1 .. $n) {
	my %r = (id => $i, name => word() . ' ' . word(), city => word(),
		 score => rnd() % 1000, tags => [map { word() } 1 .. 1 + rnd() % 4]);
	$r{note} = join(',', @{$r{tags}}) x (1 + rnd() % 3);
	push @recs, \%r;
	# churn: drop a random earlier record now and then
	if ($i % 7 == 0) { my $k = rnd() % @recs; $recs[$k] = $recs[-1]; pop @recs; }
}

my @sorted = sort { $a->{city} cmp $b->{city} or $b->{score} <=> $a->{score}
		    or $a->{id} <=> $b->{id} } @recs;
my %bycity;
push @{$bycity{$_->{city}}}, $_->{name} for @sorted;
my $out = '';
for my $c (sort keys %bycity) {
	my $list = $bycity{$c};
	$out .= "$c\t" . scalar(@$list) . "\t" . join('|', @$list[0 .. ($#$list < 9 ? $#$list : 9)]) . "\n";
}
my %words;
$words{$_}++ for map { split / / } map { $_->{name} } @sorted;
$out .= join("\n", map { "$_=$words{$_}" } sort keys %words);

printf "checksum=%08x%08x\n", length($out), unpack('%32C*', $out);
