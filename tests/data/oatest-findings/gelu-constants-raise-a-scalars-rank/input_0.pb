
Bs454840_bv6_cutJè;