int counter = 3;
static int helper(int x) {
  return x * counter;
}
int visible(int x) {
  return helper(x) + 1;
}
void _start(void) {
  for (;;) counter = visible(counter);
}
