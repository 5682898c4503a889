// Placeholder replaced by the example program (see README).
int main() { return 0; }
