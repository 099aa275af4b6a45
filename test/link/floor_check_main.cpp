// The whole of one runtime floor, linked with only the floors beneath it (test/CMakeLists.txt): this
// program never runs; that it links is the check that no source of the floor calls into a floor above.
int main() { return 0; }
