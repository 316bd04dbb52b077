;;; tests/web/html.scm --- (plucky web html)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (rnrs bytevectors)
             (ice-9 iconv)
             (web response)
             (tests lib harness)
             (plucky web html))

(define-syntax-rule (test-html name tree expected)
  (test-equal name expected (html->string tree)))
(define-syntax-rule (test-refused name tree)
  (test-error name #t (html->string tree)))

(test-begin "web/html")

(test-group "write-html: text"
  (call-guarded
   (lambda ()
     (test-html "plain" '(p "hello") "<p>hello</p>")
     (test-html "the five" '(p "<>&\"'") "<p>&lt;&gt;&amp;&quot;&#39;</p>")
     (test-html "a script as text" '(p "<script>alert(1)</script>")
                "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>")
     (test-html "an entity is text" '(p "&amp;") "<p>&amp;amp;</p>")
     (test-html "NUL and controls become U+FFFD" '(p "a\x00b\x01c\x7f")
                "<p>a\uFFFDb\uFFFDc\uFFFD</p>")
     (test-html "tab, newline, return, form feed stay" '(p "a\tb\nc\rd\fe") "<p>a\tb\nc\rd\fe</p>")
     (test-html "U+FFFD from invalid UTF-8 read leniently"
                `(p ,(bytevector->string #vu8(97 #xff 98) "UTF-8" (quote substitute)))
                "<p>a\uFFFDb</p>")
     (test-html "every width of UTF-8" '(p "é€𝄞") "<p>é€𝄞</p>")
     (test-equal "UTF-8 bytes" (string->utf8 "<p>é€𝄞</p>") (html->bytevector '(p "é€𝄞")))
     (test-html "numbers" '(p 42 " " 1.5) "<p>42 1.5</p>")
     (test-html "a long text (the buffer grows)" `(p ,(make-string 100000 #\<))
                (string-append "<p>" (string-join (make-list 100000 "&lt;") "") "</p>"))
     ;; Each special character alone, at the start, in the middle and at
     ;; the end of a run, and beside characters of every UTF-8 width.
     (for-each
      (lambda (c escape)
        (let ((s (string c)))
          (test-html (string-append "alone: " escape) `(p ,s) (string-append "<p>" escape "</p>"))
          (test-html (string-append "in runs: " escape) `(p ,(string-append s "ab" s "cd" s))
                     (string-append "<p>" escape "ab" escape "cd" escape "</p>"))
          (test-html (string-append "beside UTF-8: " escape) `(p ,(string-append "é" s "€" s "𝄞"))
                     (string-append "<p>é" escape "€" escape "𝄞</p>"))))
      '(#\& #\< #\> #\" #\' #\x00 #\x08 #\x0b #\x1f #\x7f)
      '("&amp;" "&lt;" "&gt;" "&quot;" "&#39;" "\uFFFD" "\uFFFD" "\uFFFD" "\uFFFD" "\uFFFD"))
     (test-html "every ASCII character but the special ones stays"
                `(p ,(list->string (map integer->char (append '(9 10 12 13) (iota 95 32)))))
                (string-append "<p>\t\n\f\r !&quot;#$%&amp;&#39;()*+,-./0123456789:;&lt;=&gt;?@"
                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~</p>"))
     (test-html "text nodes side by side" '(p "a" "<" "b" "" "&") "<p>a&lt;b&amp;</p>")
     (test-equal "non-ASCII text as UTF-8 bytes"
       (string->utf8 "<p>ĉu ŝi? 日本語 🙂 &lt;ok&gt;</p>")
       (html->bytevector '(p "ĉu ŝi? 日本語 🙂 <ok>"))))))

(test-group "write-html: elements"
  (call-guarded
   (lambda ()
     (test-html "nested" '(div (p "a") (p "b")) "<div><p>a</p><p>b</p></div>")
     (test-html "void elements" '(p "a" (br) (img (@ (src "x.png"))) (hr))
                "<p>a<br><img src=\"x.png\"><hr></p>")
     (test-refused "a void element with content" '(br "x"))
     (test-html "lists of children, #f and () are flattened or nothing"
                `(ul ,(map (lambda (x) `(li ,x)) '("a" "b")) #f () ,(and #f '(li "c")))
                "<ul><li>a</li><li>b</li></ul>")
     (test-html "empty element" '(p) "<p></p>")
     (test-html "doctype before html" '(html (body))
                "<!DOCTYPE html>\n<html><body></body></html>")
     (test-html "*TOP* and comments" '(*TOP* (*COMMENT* "x") (p "a")) "<p>a</p>")
     (test-html "script is raw text" '(script "if (a < b && c) f('x');")
                "<script>if (a < b && c) f('x');</script>")
     (test-refused "script text that would end it" '(script "x</SCRIPT><b>"))
     (test-refused "style text that would end it" '(style "</style"))
     (test-refused "a tag name with a space" '(|a b| "x"))
     (test-refused "a tag name with >" '(|a>| "x"))
     (test-refused "a vector" `(p ,(vector 1))))))

(test-group "write-html: attributes"
  (call-guarded
   (lambda ()
     (test-html "escaped" '(a (@ (href "/?a=1&b=\"2\"") (title "<'>")) "x")
                "<a href=\"/?a=1&amp;b=&quot;2&quot;\" title=\"&lt;&#39;&gt;\">x</a>")
     (test-html "boolean true" '(input (@ (type "checkbox") (checked #t)))
                "<input type=\"checkbox\" checked>")
     (test-html "#f omitted" '(input (@ (disabled #f) (value "v"))) "<input value=\"v\">")
     (test-html "a number" '(td (@ (colspan 2))) "<td colspan=\"2\"></td>")
     (test-html "data- and aria- names" '(div (@ (data-id "1") (aria-label "l")))
                "<div data-id=\"1\" aria-label=\"l\"></div>")
     (test-html "every special character in a value"
                '(a (@ (title "&<>\"'\x00\x7f")) "x")
                "<a title=\"&amp;&lt;&gt;&quot;&#39;\uFFFD\uFFFD\">x</a>")
     (test-html "non-ASCII in a value" '(a (@ (title "é€𝄞\"ü")) "x")
                "<a title=\"é€𝄞&quot;ü\">x</a>")
     (test-html "an empty value" '(input (@ (value ""))) "<input value=\"\">")
     (test-html "a symbol" '(p (@ (dir rtl))) "<p dir=\"rtl\"></p>")
     (test-html "boolean attributes among others"
                '(input (@ (type "checkbox") (checked #t) (disabled #f) (required #t) (name "n")))
                "<input type=\"checkbox\" checked required name=\"n\">")
     (test-html "long attribute names"
                '(p (@ (aria-describedby "d") (data-a-rather-long-attribute-name "v")))
                "<p aria-describedby=\"d\" data-a-rather-long-attribute-name=\"v\"></p>")
     (test-refused "raw HTML is not an attribute value" `(a (@ (href ,(raw "x\"y"))) "x"))
     (test-refused "an attribute name with a space" '(p (@ (|on click| "x"))))
     (test-refused "an attribute name with =" '(p (@ (|a=b| "x"))))
     (test-refused "an attribute name with a quote" `(p (@ (,(string->symbol "a\"") "x"))))
     (test-refused "an attribute name starting with a digit" '(p (@ (|1a| "x"))))
     (test-refused "an attribute without a value" '(p (@ (class))))
     (test-refused "an attribute value that is a list" '(p (@ (class ("a"))))))))

(test-group "raw"
  (call-guarded
   (lambda ()
     (test-html "unescaped when asked" `(div ,(raw "<b>ok</b> &amp;")) "<div><b>ok</b> &amp;</div>")
     (test-assert "raw?" (raw? (raw "x")))
     (test-error "raw of a non-string" #t (raw 'x))
     (test-html "a list that looks like raw is an element" '(div (raw "<b>"))
                "<div><raw>&lt;b&gt;</raw></div>")
     (test-html "a string that looks like HTML is text" '(div "<b>ok</b>")
                "<div>&lt;b&gt;ok&lt;/b&gt;</div>")
     (test-html "raw beside text, each as asked" `(p "<i>" ,(raw "<i>") "</i>" ,(raw "</i>"))
                "<p>&lt;i&gt;<i>&lt;/i&gt;</i></p>")
     (test-html "raw non-ASCII" `(p ,(raw "<b>é€𝄞</b>")) "<p><b>é€𝄞</b></p>"))))

(test-group "write-html"
  (call-guarded
   (lambda ()
     (test-equal "to a port" "<p>a&amp;b</p>"
       (call-with-output-string (lambda (port) (write-html '(p "a&b") port))))
     (test-equal "nothing written for a refused tree" ""
       (call-with-output-string
         (lambda (port) (false-if-exception (write-html '(p "a" (|a b|)) port))))))))

(test-group "html-response"
  (call-guarded
   (lambda ()
     (let-values (((response body) (html-response '(p "é"))))
       (test-equal "headers" '((content-type . (text/html (charset . "utf-8")))) response)
       (test-equal "body" (string->utf8 "<p>é</p>") body))
     (let-values (((response body) (html-response '(p "x") #:code 404)))
       (test-equal "a code" 404 (response-code response))))))

(test-end "web/html")
