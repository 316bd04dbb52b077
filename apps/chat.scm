;;; apps/chat.scm --- a chat room over WebSocket, server-sent events as fallback
;;;
;;; Serve it:  bin/plucky serve apps/chat.scm
;;; then open http://127.0.0.1:8080/ in two browsers.
;;;
;;;   GET  /         the page: a message list and a form
;;;   GET  /chat.js  its script
;;;   GET  /ws       the WebSocket: each text message sent is said to all;
;;;                  the last 50 messages arrive on opening
;;;   GET  /events   server-sent events, for a browser without WebSocket
;;;                  (or a proxy that refuses the upgrade), one thread each
;;;   POST /say      text=… : what such a browser says
;;;   GET  /worker   the process id of the worker that answers
;;;
;;; The routes are data, (plucky web router)'s; the page's links are
;;; relative, so the app can be mounted under a prefix (apps/demo.scm
;;; mounts it at /chat).
;;;
;;; Workers.  Each worker is a process with its own clients, so a
;;; message must cross to the others.  Each worker binds a Unix datagram
;;; socket in a directory named after the master (its parent process),
;;; watched by its own loop (`loop-watch!'), and sends what is said to
;;; every socket in that directory.  Why datagrams: a message is one
;;; sendto per worker and one read, no framing, no connection to keep,
;;; no process in the middle (the master reads no request and need not
;;; learn about chats), and a worker that died or was replaced by a
;;; reload shows as a refused send, whose socket file is then removed.
;;; A shared SQLite table would need polling (latency or wasted wakeups);
;;; relaying through the master would mean changing the server for one
;;; app.  The price: a worker whose receive queue is full misses that
;;; message (as a slow WebSocket client does), and two messages said at
;;; once on two workers may show in either order.
;;;
;;; A worker joins the room when it handles its first request (the loop
;;; must be running to watch the socket), and asks the others for their
;;; history, so that its first client sees the same last messages.
;;;
;;; Hosts.  With DATABASE_URL set (postgresql://…), the room is a
;;; PostgreSQL database instead, which the workers of several hosts
;;; share: what is said is a row of the table plucky_chat (the history a
;;; joining worker reads) and a NOTIFY on the channel plucky_chat, in one
;;; statement; each worker LISTENs (`pg-listen', on its loop) and hears
;;; every message, its own too, from there.  A worker whose listening
;;; connection was lost hears nothing said until it is back (PostgreSQL
;;; keeps no notification for it).  A WebSocket's message is said from
;;; the loop's callback, where the statement's round trip blocks the
;;; worker (a POST /say suspends only its request).
;;;
;;; WebSocket callbacks run on the worker's loop thread, and so do POST
;;; /say (a plain handler), the room's socket and the event streams: a
;;; stream waits for the next message with `event-wait', which suspends
;;; it and leaves the worker free, so ten thousand listeners cost no
;;; thread.

(use-modules (plucky server)
             (plucky web router)
             (plucky web forms)
             (plucky web middleware)
             (plucky web security)
             (web request)
             (web uri)
             (web response)
             (rnrs bytevectors)
             ((srfi srfi-1) #:select (every))
             (ice-9 ftw))

;; WebSocket's modules are loaded at the first request for /ws, and
;; PostgreSQL's only with DATABASE_URL set: a worker that serves neither
;; leaves their compiled data, which every collection scans, unmapped
;; (bench/demo-gc's ".go roots"; tests/apps/lazy.scm).  This is what
;; define-module's #:autoload does, for a file that is not a module (a
;; macro would load its module where it is expanded: none is used).
(eval-when (expand load eval)
  (module-autoload! (current-module) '(plucky web websocket)
                    '(websocket-request? websocket-upgrade websocket-send websocket-close))
  (module-autoload! (current-module) '(plucky db postgresql)
                    '(make-pg-pool pg-execute pg-query pg-query-row pg-listen
                      pg-notification-payload call-with-pg-connection
                      call-with-transaction)))

(define max-text 500)
(define history-size 50)

;; The last messages, newest first, each (id . text), and the id of the
;; newest.  Everything here runs on the worker's loop thread: handlers,
;; the room's socket, and the event streams, which wait on `changed'.
(define history '())
(define last-id 0)
(define changed (make-event))

;; The open WebSockets of this worker.
(define sockets '())

(define (hear! text)
  ;; Keep TEXT in the history and send it to this worker's clients.  On
  ;; the loop's thread.
  (set! last-id (+ last-id 1))
  (set! history (cons (cons last-id text)
                      (if (>= (length history) history-size)
                          (list-head history (- history-size 1))
                          history)))
  (event-signal! changed)
  (for-each (lambda (ws)
              ;; A client whose queue is full misses the message rather
              ;; than slowing the room.
              (websocket-send ws text))
            sockets))

(define (say! text)
  ;; TEXT is said on this worker: to its clients and the other workers
  ;; (and hosts, through the database: see the commentary).
  (let ((text (if (> (string-length text) max-text) (substring text 0 max-text) text)))
    (if database
        (say-to-database! text)
        (begin
          (hear! text)
          (tell-others! `(say ,text))))))

;;;
;;; The room across hosts: a PostgreSQL database
;;;

(define database-url (getenv "DATABASE_URL"))
(define database (and database-url (make-pg-pool database-url #:size 2)))
(define kept-rows 1000)                 ; the table's rows, about

(define (say-to-database! text)
  ;; the row and the notification, committed together; now and then
  ;; the rows past the last `kept-rows' go
  (let ((id (vector-ref (pg-query-row database
                                      "WITH m AS (INSERT INTO plucky_chat (text) VALUES ($1) RETURNING id)
                                       SELECT id, pg_notify('plucky_chat', $1) FROM m"
                                      text)
                        0)))
    (when (zero? (modulo id 100))
      (pg-execute database "DELETE FROM plucky_chat WHERE id <= $1" (- id kept-rows)))))

(define (join-database!)
  ;; the table made if need be (under a lock: two hosts starting at
  ;; once would race in the catalog), then LISTEN
  (call-with-pg-connection database
    (lambda (conn)
      (call-with-transaction
       conn
       (lambda ()
         (pg-execute conn "SELECT pg_advisory_xact_lock(7203947)")
         (pg-execute conn "SET LOCAL client_min_messages = warning")
         (pg-execute conn "CREATE TABLE IF NOT EXISTS plucky_chat (
                             id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                             text TEXT NOT NULL)")))))
  (pg-listen database-url "plucky_chat"
             (lambda (notification) (hear! (pg-notification-payload notification)))
             #:on-connect
             (lambda ()
               ;; the first time: the last messages, as a worker of the
               ;; room of datagrams asks the others for them
               (when (null? history)
                 (for-each (lambda (row) (hear! (vector-ref row 0)))
                           (reverse (pg-query database "SELECT text FROM plucky_chat
                                                        ORDER BY id DESC LIMIT $1"
                                              history-size)))))))

;;;
;;; The room: a datagram socket per worker
;;;

;; This worker's socket, once it joined, and the pid that joined: a
;; worker forked from a process that had joined must join afresh.
(define room #f)
(define room-pid #f)

(define (room-directory)
  (string-append (or (getenv "XDG_RUNTIME_DIR") "/tmp")
                 "/plucky-chat-" (number->string (getuid))
                 "-" (number->string (getppid))))

(define (room-path pid)
  (string-append (room-directory) "/" (number->string pid)))

(define (join-room!)
  ;; On the loop's thread, at each request: the first one joins.
  (unless (eqv? room-pid (getpid))
    (set! room-pid (getpid))
    (if database
        (catch #t
          join-database!
          (lambda args
            (log-line "chat: no room across hosts: ~s" args)))
        (join-socket-room!))))

(define (join-socket-room!)
  (catch #t
    (lambda ()
      (let ((directory (room-directory))
            (path (room-path (getpid)))
            (s (socket AF_UNIX SOCK_DGRAM 0)))
        (false-if-exception (mkdir directory #o700))
        ;; Only a directory of ours that no one else may write to.
        (let ((st (stat directory)))
          (unless (and (= (stat:uid st) (getuid))
                       (zero? (logand (stat:perms st) #o077)))
            (error "room directory not private" directory)))
        (false-if-exception (delete-file path))
        (bind s AF_UNIX path)
        (fcntl s F_SETFL (logior O_NONBLOCK (fcntl s F_GETFL)))
        (set! room s)
        (loop-watch! (port->fdes s)
                     #:on-read listen!
                     #:on-stop (lambda ()
                                 (loop-unwatch! (port->fdes s))
                                 (close-port s)
                                 (false-if-exception (delete-file path))
                                 ;; The last worker out removes it.
                                 (false-if-exception (rmdir directory))))
        (tell-others! `(history? ,(getpid)))))
    (lambda args
      ;; Alone, then: this worker's clients still talk among themselves.
      (log-line "chat: no room across workers: ~s" args)
      (set! room #f))))

(define (send-to! pid datum)
  ;; Send DATUM to the worker PID; forget a worker that is gone.
  (let ((bytes (string->utf8 (object->string datum))))
    (catch 'system-error
      (lambda () (sendto room bytes AF_UNIX (room-path pid) MSG_DONTWAIT))
      (lambda args
        (when (memv (system-error-errno args) (list ECONNREFUSED ENOENT))
          (false-if-exception (delete-file (room-path pid))))))))

(define (tell-others! datum)
  (when room
    (for-each (lambda (name)
                (let ((pid (string->number name)))
                  (when (and pid (not (= pid (getpid))))
                    (send-to! pid datum))))
              (or (scandir (room-directory)) '()))))

(define room-buffer (make-bytevector (* 256 1024)))

(define (listen!)
  ;; The room's socket is readable: take every datagram waiting.
  (let lp ()
    (let ((n (catch 'system-error
               (lambda () (recv! room room-buffer))
               (lambda args #f))))
      (when (and n (> n 0))
        (let ((datum (false-if-exception
                      (call-with-input-string
                       (utf8->string (bytevector-slice room-buffer n)) read))))
          (match-datum datum))
        (lp)))))

(define (match-datum datum)
  (cond
   ((and (pair? datum) (eq? (car datum) 'say) (pair? (cdr datum))
         (string? (cadr datum)))
    (hear! (cadr datum)))
   ((and (pair? datum) (eq? (car datum) 'history?) (pair? (cdr datum))
         (integer? (cadr datum)))
    (send-to! (cadr datum) `(history ,@(map cdr (history-after 0)))))
   ((and (pair? datum) (eq? (car datum) 'history) (null? history)
         (every string? (cdr datum)))
    ;; The first answer to our question, if nothing was said meanwhile.
    (for-each hear! (cdr datum)))
   (else #f)))

(define (bytevector-slice bv n)
  (let ((out (make-bytevector n)))
    (bytevector-copy! bv 0 out 0 n)
    out))

(define (history-after id)
  ;; -> the messages newer than ID, oldest first
  (reverse (filter (lambda (m) (> (car m) id)) history)))

(define (events port)
  ;; An event stream: the history, then each message as it is said, until
  ;; the client goes (the write raises, which ends the stream).
  (let lp ((seen 0))
    (let ((new (history-after seen)))
      (for-each (lambda (m)
                  (format port "id: ~a\ndata: ~a\n\n" (car m)
                          (string-map (lambda (c) (if (char=? c #\newline) #\space c))
                                      (cdr m))))
                new)
      (when (null? new)
        ;; A comment, so that the head goes out at once and a client
        ;; that is gone is noticed: the write raises, which ends the
        ;; stream.
        (display ": waiting\n\n" port))
      (force-output port)
      (let ((seen (if (null? new) seen (caar (last-pair new)))))
        ;; Suspends the stream, not the worker (plucky server suspend).
        (when (= last-id seen)
          (event-wait changed #:timeout-ms 15000))
        (lp seen)))))

(define page "<!DOCTYPE html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>plucky chat</title>
<style>body{font-family:sans-serif;max-width:40em;margin:2em auto}
#log{list-style:none;padding:0;border:1px solid #ccc;height:20em;overflow-y:auto}
#log li{padding:.2em .5em}#how{color:#888}</style></head>
<body><h1>plucky chat</h1>
<ul id=\"log\"></ul>
<form id=\"say\" method=\"post\" action=\"say\">
<input name=\"text\" id=\"text\" autocomplete=\"off\" maxlength=\"500\" autofocus>
<button>Say</button></form>
<p id=\"how\"></p>
<script src=\"chat.js\"></script></body></html>
")

(define script
  ;; the page's script, a file of its own: the Content-Security-Policy
  ;; of (plucky web security) allows no inline script
  "var log = document.getElementById('log'), how = document.getElementById('how');
var ws = null;
function show(text) {
  var li = document.createElement('li'); li.textContent = text;
  log.appendChild(li); log.scrollTop = log.scrollHeight;
}
function fallback() {
  how.textContent = 'server-sent events';
  var es = new EventSource('events');
  es.onmessage = function (e) { show(e.data); };
}
if (window.WebSocket) {
  var url = new URL('ws', location.href);
  url.protocol = location.protocol == 'https:' ? 'wss:' : 'ws:';
  ws = new WebSocket(url);
  var opened = false;
  ws.onopen = function () { opened = true; how.textContent = 'WebSocket'; };
  ws.onmessage = function (e) { show(e.data); };
  ws.onclose = function () { if (!opened) { ws = null; fallback(); } else how.textContent = 'closed'; };
} else fallback();
document.getElementById('say').onsubmit = function (e) {
  var input = document.getElementById('text');
  e.preventDefault();
  if (!input.value) return;
  if (ws && ws.readyState == 1) ws.send(input.value);
  else fetch('say', {method: 'POST', body: new URLSearchParams({text: input.value})});
  input.value = '';
};
")

(define (websocket request body params)
  (if (websocket-request? request)
      (websocket-upgrade
       request
       #:max-message (* 4 max-text)
       #:on-open (lambda (ws)
                   (set! sockets (cons ws sockets))
                   (for-each (lambda (m) (websocket-send ws (cdr m)))
                             (history-after 0)))
       #:on-message (lambda (ws message)
                      (if (string? message)
                          (say! message)
                          (websocket-close ws 1003 "text only")))
       #:on-close (lambda (ws code reason)
                    (set! sockets (delq ws sockets))))
      (values (build-response #:code 400 #:headers '((content-type . (text/plain))))
              "a WebSocket upgrade is expected here\n")))

(define (event-stream request body params)
  (values '((content-type . (text/event-stream))
            (cache-control . (no-cache)))
          events))

(define (say request body params)
  (let* ((fields (urlencoded->alist (if body (utf8->string body) "")))
         (text (assoc-ref fields "text")))
    (when (and text (not (string-null? text)))
      (say! text))
    (values (build-response #:code 303
                            #:headers `((location . ,(string->uri-reference "./"))))
            "")))

(define (worker request body params)
  (values '((content-type . (text/plain))) (number->string (getpid))))

(define (chat-page request body params)
  (values '((content-type . (text/html (charset . "utf-8")))) page))

(define (chat-script request body params)
  (values '((content-type . (application/javascript (charset . "utf-8")))) script))

(define (joining-the-room handler)
  ;; A middleware: the worker joins the room at its first request.
  (lambda (request body)
    (join-room!)
    (handler request body)))

(wrap (router-handler
       (make-router
        (list (route 'GET "/" chat-page #:name 'chat)
              (route 'GET "/ws" websocket #:name 'websocket)
              (route 'GET "/events" event-stream #:name 'events)
              (route 'POST "/say" say #:name 'say)
              (route 'GET "/worker" worker #:name 'worker)
              (route 'GET "/chat.js" chat-script #:name 'script))))
      (with-security-headers)
      joining-the-room)
