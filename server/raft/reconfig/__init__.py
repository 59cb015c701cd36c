"""Changing the voters (KIP-853) at the leader, one module per request as Kafka has one
handler per request: ``add_voter`` (AddRaftVoter), ``remove_voter`` (RemoveRaftVoter),
``update_voter`` (UpdateRaftVoter), ``kraft_upgrade`` (raising kraft.version 0 to 1), over the
pending change the leader's state keeps (``pending``). ``membership.Membership`` is what the
Raft core calls.

Kafka's checks, in Kafka's order and with its error codes: the request must be of this cluster
and reach the leader; a voter key needs a directory id and the leader's listener; only one
change is in flight; the leader must have committed in its epoch and the last voter change
must be committed; the quorum must run kraft.version 1.
"""
