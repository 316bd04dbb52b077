/* bench/pg-roundtrip/roundtrip.c: libpq's own round trip, the yardstick
   of (plucky db postgresql)'s.  Usage: roundtrip URL N
   Prepares SELECT $1::int once, then runs it N times with PQexecPrepared
   (synchronous, text format, as libpq's users write it) and prints the
   microseconds per round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <libpq-fe.h>

int main(int argc, char **argv)
{
  if (argc != 3) { fprintf(stderr, "usage: roundtrip URL N\n"); return 2; }
  PGconn *conn = PQconnectdb(argv[1]);
  if (PQstatus(conn) != CONNECTION_OK) { fprintf(stderr, "%s", PQerrorMessage(conn)); return 1; }
  PGresult *res = PQprepare(conn, "q", "SELECT $1::int", 1, NULL);
  if (PQresultStatus(res) != PGRES_COMMAND_OK) { fprintf(stderr, "%s", PQerrorMessage(conn)); return 1; }
  PQclear(res);
  long n = atol(argv[2]), sum = 0;
  char value[16];
  const char *values[1] = { value };
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++) {
    snprintf(value, sizeof value, "%ld", i % 10000);
    res = PQexecPrepared(conn, "q", 1, values, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) { fprintf(stderr, "%s", PQerrorMessage(conn)); return 1; }
    sum += atol(PQgetvalue(res, 0, 0));
    PQclear(res);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
  printf("%.2f\n", us);
  PQfinish(conn);
  return sum < 0;
}
